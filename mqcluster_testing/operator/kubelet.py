"""StatefulSets of the emulator run as real processes: a small kubelet for full-loop tests.

It plays the StatefulSet controller and the kubelet for one namespace: each
StatefulSet's pods ``0..replicas-1`` run as ``mqbroker`` / ``mqnamesrv`` /
``mqcontroller`` processes from the ConfigMap the operator rendered (as the pod's
start script would concatenate it), each on its own 127.n.0.x address, with a
directory per pod as its PVC. Init containers run first (``python -m ...``
commands). A Pod object appears once the process has booted (Ready, with its
address as ``podIP`` and the template's revision as ``controller-revision-hash``);
a Pod the operator deletes has its process stopped and is started again; pods
beyond ``replicas`` stop; a process that dies is restarted (restartPolicy Always).
Each pod of a StatefulSet with a claim template has its PersistentVolumeClaim object
(``data-<pod>``): a pod started without one gets a new, empty directory, as a new
volume would be (the operator deletes a claim to wipe a replica's store). A test may
``hold`` a pod stopped (to edit its store) and ``release`` it.
The StatefulSet's status (readyReplicas, updateRevision) follows. A pod whose
image is in ``broken_images`` gets no process: its Pod stays Pending and not Ready
with its container waiting in ``ImagePullBackOff`` until the operator deletes it.

``resolve`` maps the pods' DNS names in addresses to the local ones, for the
operator's probes and the migration driver.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqcluster_operator import names
from mqcluster_operator.k8s import Api, ApiError, Ref

from .emulator import Emulator
from .pod_process import Addresses, Container, PodProcess, start_process


def revision_of(template: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


@dataclass
class LocalKubelet:
    api: Api
    emulator: Emulator
    namespace: str
    workdir: Path
    ip_base: int = 40
    addresses: Addresses = field(init=False)
    running: dict[str, PodProcess] = field(default_factory=dict)
    starting: set[str] = field(default_factory=set)
    started: list[str] = field(default_factory=list)
    held: set[str] = field(default_factory=set)
    """Every pod start, in order (a pod restarted twice appears twice)."""
    broken_images: set[str] = field(default_factory=set)
    stuck: dict[str, str] = field(default_factory=dict)
    """Pods left in ImagePullBackOff, and their uids."""
    _task: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self.addresses = Addresses(self.ip_base)

    def ip_of(self, pod: str) -> str:
        return self.addresses.ip_of(pod)

    def resolve(self, address: str) -> str:
        """``bg-1.bg-headless.ns.svc:10911`` (or a URL holding one) -> ``127.n.0.x:10911``."""
        return self.addresses.resolve(address)

    def statefulsets(self) -> list[dict[str, Any]]:
        return [s for s in self.emulator.all("apps/v1/statefulsets")
                if s["metadata"].get("namespace") == self.namespace]

    def hosts(self) -> dict[str, str]:
        return self.addresses.hosts(self.statefulsets())

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for pod in list(self.running):
            await self.running.pop(pod).proc.kill()

    async def _loop(self) -> None:
        while True:
            # a conflict from the emulator: the next round sees the new state
            with contextlib.suppress(ApiError):
                await self.sync()
            await asyncio.sleep(0.1)

    async def sync(self) -> None:
        starts = []
        for sts in self.statefulsets():
            name, spec = sts["metadata"]["name"], sts["spec"]
            want = int(spec.get("replicas") or 0)
            revision = revision_of(spec["template"])
            for i in range(want):
                pod = names.pod(name, i)
                if pod in self.starting:
                    continue
                if pod in self.held:
                    await self.stop(pod, delete=True)
                    continue
                live = self.emulator.live("v1/pods", self.namespace, pod)
                if pod in self.stuck:
                    if live is not None and live["metadata"]["uid"] == self.stuck[pod]:
                        continue
                    del self.stuck[pod]
                proc = self.running.get(pod)
                if proc is not None and (live is None or live["metadata"]["uid"] != proc.uid
                                         or proc.proc.proc is None
                                         or proc.proc.proc.returncode is not None):
                    await self.stop(pod, delete=live is not None)
                    proc = None
                if proc is None:
                    starts.append(self.run_pod(sts, i, revision))
                    self.starting.add(pod)
            for pod in [p for p in self.running if p.rsplit("-", 1)[0] == name
                        and int(p.rsplit("-", 1)[1]) >= want]:
                await self.stop(pod, delete=True)
            ready = sum(1 for p in self.running if p.rsplit("-", 1)[0] == name)
            status = {"replicas": ready, "readyReplicas": ready, "updateRevision": revision,
                      "currentRevision": revision, "observedGeneration":
                          sts["metadata"].get("generation")}
            if any(sts.get("status", {}).get(k) != v for k, v in status.items()):
                await self.api.patch(Ref("apps/v1", "StatefulSet", self.namespace, name),
                                     {"status": status}, "status")
        if starts:
            await asyncio.gather(*starts)

    async def stop(self, pod: str, delete: bool) -> None:
        running = self.running.pop(pod, None)
        if running is not None:
            await running.proc.terminate(timeout=10)
        if delete:
            with contextlib.suppress(ApiError):
                await self.api.delete(Ref("v1", "Pod", self.namespace, pod))

    async def hold(self, pod: str) -> Path:
        """Stops ``pod`` until ``release``; its data directory."""
        self.held.add(pod)
        while pod in self.running or pod in self.starting:
            await asyncio.sleep(0.1)  # the sync loop stops it
        return self.workdir / pod

    def release(self, pod: str) -> None:
        self.held.discard(pod)

    async def claim(self, sts: dict[str, Any], pod: str, root: Path) -> None:
        templates = sts["spec"].get("volumeClaimTemplates") or []
        if not templates:
            return
        name = f"{templates[0]['metadata']['name']}-{pod}"
        if self.emulator.live("v1/persistentvolumeclaims", self.namespace, name) is not None:
            return
        shutil.rmtree(root, ignore_errors=True)  # a new claim: a new, empty volume
        await self.api.create({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": self.namespace,
                         "labels": dict(templates[0]["metadata"].get("labels") or {})},
            "spec": templates[0]["spec"],
        })

    async def kill(self, pod: str) -> None:
        """SIGKILL the pod's process (the kubelet restarts it, as restartPolicy Always)."""
        await self.running[pod].proc.kill()

    async def run_pod(self, sts: dict[str, Any], ordinal: int, revision: str) -> None:
        name = sts["metadata"]["name"]
        pod = names.pod(name, ordinal)
        try:
            template = sts["spec"]["template"]
            container = template["spec"]["containers"][0]
            if container["image"] in self.broken_images:
                await self.pull_fails(template, pod, revision)
                return
            config_map = Container.of(template["spec"]).config_map
            data = (self.emulator.live("v1/configmaps", self.namespace, config_map) or {})["data"]
            root = self.workdir / pod
            await self.claim(sts, pod, root)
            proc = await start_process(pod, ordinal, template["spec"], data, root,
                                       self.ip_of(pod), self.hosts())
            ip = self.ip_of(pod)
            labels = {**template["metadata"].get("labels", {}),
                      "controller-revision-hash": revision,
                      "statefulset.kubernetes.io/pod-name": pod}
            created = await self.api.create({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod, "namespace": self.namespace, "labels": labels,
                             "annotations": dict(template["metadata"].get("annotations", {}))},
                "spec": {"containers": [{"name": container["name"],
                                         "image": container["image"]}]},
                "status": {"phase": "Running", "podIP": ip,
                           "conditions": [{"type": "Ready", "status": "True"}]},
            })
            self.running[pod] = PodProcess(proc, created["metadata"]["uid"], revision)
            self.started.append(pod)
        finally:
            self.starting.discard(pod)

    async def pull_fails(self, template: dict[str, Any], pod: str, revision: str) -> None:
        container = template["spec"]["containers"][0]
        labels = {**template["metadata"].get("labels", {}),
                  "controller-revision-hash": revision,
                  "statefulset.kubernetes.io/pod-name": pod}
        created = await self.api.create({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod, "namespace": self.namespace, "labels": labels},
            "spec": {"containers": [{"name": container["name"], "image": container["image"]}]},
            "status": {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}],
                       "containerStatuses": [{
                           "name": container["name"], "image": container["image"],
                           "ready": False, "restartCount": 0,
                           "state": {"waiting": {"reason": "ImagePullBackOff",
                                                 "message": "Back-off pulling image"}}}]},
        })
        self.stuck[pod] = created["metadata"]["uid"]
