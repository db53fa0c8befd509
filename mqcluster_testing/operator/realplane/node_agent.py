"""The kubelet (and the scheduler) for tests on the real control plane.

For one namespace, the agent registers a Node (and renews its Lease, so the node
lifecycle controller never marks it unreachable), binds every pending Pod to it
(``POST pods/<name>/binding``), runs each bound pod's container as a local process
(``pod_process``: config rendered from the ConfigMap, 127.n.0.x addresses, a data
directory per PersistentVolumeClaim uid) and writes the pod's status through the status
subresource: phase, podIP, the conditions PodScheduled, Initialized, ContainersReady and
Ready, containerStatuses with restartCount, ready, started and state. A process that
dies is started again as ``restartPolicy: Always`` would (restartCount + 1); a pod being
deleted has its process stopped and is then deleted with ``gracePeriodSeconds=0``.

It does not play the StatefulSet controller: which pods exist, their order, revisions
(``controller-revision-hash``), OnDelete, PVC creation and garbage collection are the
real kube-controller-manager's. PVCs stay Pending (no provisioner): a claim's uid names
its directory, so a claim the operator deletes and the controller makes anew is a new,
empty volume. Endpoints refuse loopback pod IPs: check Service selection from selectors
and labels.

For tests: ``running`` (pod -> process), ``started`` (every start, in order),
``kill(pod)`` (SIGKILL; the agent restarts it), ``hold(pod)``/``release(pod)`` (keep a
pod's process stopped, to edit its store), ``broken_images`` (pods of these images stay
``ImagePullBackOff``; ``stuck`` names them), ``resolve``/``ip_of`` for addresses.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp

from mqcluster_operator.k8s import ApiError
from mqcluster_testing.broker.procs import Proc

from ..pod_process import Addresses, Container, PodProcess, run_pre_stop, start_process
from .controlplane import KubeApi
from .mirror import Mirror

log = logging.getLogger(__name__)

Obj = dict[str, Any]


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class Slot:
    """One pod (by uid) the agent runs."""

    uid: str
    task: asyncio.Task[None] | None = None
    proc: Proc | None = None
    restarts: int = 0
    stopping: bool = False


@dataclass
class NodeAgent:
    api: KubeApi
    mirror: Mirror
    workdir: Path
    node: str = ""
    ip_base: int = 40
    lease_seconds: int = 40
    addresses: Addresses = field(init=False)
    running: dict[str, PodProcess] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)
    """Every pod start, in order (a pod restarted twice appears twice)."""
    held: set[str] = field(default_factory=set)
    broken_images: set[str] = field(default_factory=set)
    stuck: dict[str, str] = field(default_factory=dict)
    """Pods left in ImagePullBackOff, and their uids."""
    errors: list[str] = field(default_factory=list)
    """Pod starts that failed (the pod is retried as a crashed container would be)."""
    slots: dict[str, Slot] = field(default_factory=dict)
    volumes: dict[str, Path] = field(default_factory=dict)
    """Each pod's data directory as last started."""
    _procs: list[Proc] = field(default_factory=list)
    """Every process started: all are killed at close, whatever their task was doing."""
    _finalizing: set[str] = field(default_factory=set)
    _binding: set[str] = field(default_factory=set)
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.addresses = Addresses(self.ip_base)
        self.node = self.node or f"node-{self.namespace}"

    @property
    def namespace(self) -> str:
        return self.mirror.namespace

    def ip_of(self, pod: str) -> str:
        return self.addresses.ip_of(pod)

    def resolve(self, address: str) -> str:
        """``bg-1.bg-headless.ns.svc:10911`` (or a URL holding one) -> ``127.n.0.x:10911``."""
        return self.addresses.resolve(address)

    # ---- lifecycle

    async def start(self) -> None:
        await self._register_node()
        self.mirror.listen(self._changed)
        self._tasks = [asyncio.create_task(self._loop(), name="node agent"),
                       asyncio.create_task(self._heartbeat(), name="node lease")]
        self._wake.set()

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for slot in self.slots.values():
            slot.stopping = True
            if slot.task is not None:
                slot.task.cancel()
        for task in [*self._tasks, *(s.task for s in self.slots.values() if s.task)]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for proc in self._procs:
            await proc.kill()
        self.running.clear()
        with contextlib.suppress(ApiError, aiohttp.ClientError):
            await self.api.delete_path(f"/api/v1/nodes/{self.node}")
            await self.api.delete_path(
                f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{self.node}")

    def _changed(self, plural: str, kind: str, obj: Obj) -> None:
        if plural == "v1/pods":
            self._wake.set()

    async def _register_node(self) -> None:
        with contextlib.suppress(ApiError):  # a leftover of an earlier agent is reused
            await self.api.request("POST", "/api/v1/nodes", body={
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": self.node, "labels": {
                    "kubernetes.io/hostname": self.node, "kubernetes.io/os": "linux"}}})
        stamp = now()
        await self.api.request(
            "PATCH", f"/api/v1/nodes/{self.node}/status",
            content_type="application/merge-patch+json",
            body={"status": {
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                "message": "test node agent", "lastHeartbeatTime": stamp,
                                "lastTransitionTime": stamp}],
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                              {"type": "Hostname", "address": self.node}],
                "capacity": {"cpu": "2", "memory": "24Gi", "pods": "110"},
                "allocatable": {"cpu": "2", "memory": "24Gi", "pods": "110"}}})
        await self._renew_lease()

    async def _renew_lease(self) -> None:
        path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
        spec = {"holderIdentity": self.node, "leaseDurationSeconds": self.lease_seconds,
                "renewTime": micro_now()}
        try:
            await self.api.request("PATCH", f"{path}/{self.node}", body={"spec": spec},
                                   content_type="application/merge-patch+json")
        except ApiError as exc:
            if exc.status != 404:
                raise
            await self.api.request("POST", path, body={
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.node, "namespace": "kube-node-lease"}, "spec": spec})

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.lease_seconds / 4)
            with contextlib.suppress(ApiError, aiohttp.ClientError, TimeoutError):
                await self._renew_lease()

    async def _loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.2)  # 0.2 s: dead processes
            self._wake.clear()
            try:
                await self.sync()
            except (TimeoutError, ApiError, aiohttp.ClientError) as exc:
                log.warning("node agent: %s", exc)

    # ---- one round

    async def sync(self) -> None:
        pods = {p["metadata"]["name"]: p for p in self.mirror.all("v1/pods")}
        for name, slot in list(self.slots.items()):
            pod = pods.get(name)
            if pod is None or pod["metadata"]["uid"] != slot.uid:
                await self._stop(name)  # deleted (and finalized elsewhere) or replaced
        for name, pod in pods.items():
            meta, spec = pod["metadata"], pod["spec"]
            if meta.get("deletionTimestamp"):
                if meta["uid"] not in self._finalizing:
                    self._finalizing.add(meta["uid"])
                    self._spawn(self._finalize(pod), f"finalize {name}")
            elif not spec.get("nodeName"):
                if meta["uid"] not in self._binding:
                    self._binding.add(meta["uid"])
                    await self._bind(pod)
            elif spec["nodeName"] == self.node:
                known = self.slots.get(name)
                if known is None:
                    fresh = self.slots[name] = Slot(meta["uid"])
                    fresh.task = self._spawn(self._run(name, fresh), f"run {name}")
                elif known.task is not None and known.task.done() and not known.stopping:
                    if name in self.held or name in self.stuck:
                        continue
                    known.restarts += 1  # the container exited: restartPolicy Always
                    known.task = self._spawn(self._run(name, known), f"restart {name}")

    def _spawn(self, coro: Any, name: str) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.create_task(coro, name=name)
        self._tasks.append(task)
        task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)
        return task

    async def _bind(self, pod: Obj) -> None:
        name = pod["metadata"]["name"]
        try:
            await self.api.request(
                "POST", f"/api/v1/namespaces/{self.namespace}/pods/{quote(name)}/binding",
                body={"apiVersion": "v1", "kind": "Binding",
                      "metadata": {"name": name, "uid": pod["metadata"]["uid"]},
                      "target": {"apiVersion": "v1", "kind": "Node", "name": self.node}})
        except ApiError as exc:
            if exc.status not in (404, 409):  # gone, or bound meanwhile
                raise

    async def _finalize(self, pod: Obj) -> None:
        name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
        slot = self.slots.get(name)
        if slot is not None and slot.uid == uid:
            root = self.volumes.get(name)
            proc = slot.proc
            if proc is not None and proc.proc is not None and proc.proc.returncode is None \
                    and root is not None:
                # As a kubelet does: the hook (a master's hand-over), then the stop.
                grace = float(pod["spec"].get("terminationGracePeriodSeconds") or 30)
                await run_pre_stop(pod["spec"]["containers"][0], root, grace)
            await self._stop(name)
        try:
            await self.api.request(
                "DELETE", f"/api/v1/namespaces/{self.namespace}/pods/{quote(name)}",
                body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                      "preconditions": {"uid": uid}})
        except ApiError as exc:
            if exc.status not in (404, 409):  # not gone: the next round tries again
                self._finalizing.discard(uid)
                self._wake.set()

    async def _stop(self, name: str) -> None:
        slot = self.slots.pop(name, None)
        if slot is None:
            return
        slot.stopping = True
        if slot.task is not None and not slot.task.done():
            slot.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await slot.task
        running = self.running.get(name)
        if running is not None and running.uid == slot.uid:
            del self.running[name]
        if slot.proc is not None:
            await slot.proc.terminate(timeout=10)
        self.stuck.pop(name, None)

    # ---- a pod's container

    def _pod(self, name: str, uid: str) -> Obj | None:
        pod = self.mirror.live("v1/pods", self.namespace, name)
        return pod if pod is not None and pod["metadata"]["uid"] == uid else None

    async def _run(self, name: str, slot: Slot) -> None:
        """Starts the container, reports it Ready, and returns when the process exits."""
        pod = self._pod(name, slot.uid)
        if pod is None:
            return
        container = pod["spec"]["containers"][0]
        if slot.restarts == 0:
            await self._status(pod, slot, "Pending", ready=False,
                               state={"waiting": {"reason": "ContainerCreating"}})
        if container["image"] in self.broken_images:
            self.stuck[name] = slot.uid
            await self._status(pod, slot, "Pending", ready=False, state={"waiting": {
                "reason": "ImagePullBackOff",
                "message": f'Back-off pulling image "{container["image"]}"'}})
            return
        while name in self.held:
            await asyncio.sleep(0.1)
        try:
            proc = await self._start_process(pod)
        except (RuntimeError, ApiError, OSError, ValueError, KeyError) as exc:
            self.errors.append(f"{name}: {exc}")
            log.warning("node agent: %s did not start: %s", name, exc)
            await self._status(pod, slot, "Running", ready=False, state={"terminated": {
                "exitCode": 1, "reason": "Error", "message": str(exc)[-500:]}})
            await asyncio.sleep(1.0)  # a crash loop's back-off, short
            return
        slot.proc = proc
        revision = pod["metadata"].get("labels", {}).get("controller-revision-hash", "")
        self.running[name] = PodProcess(proc, slot.uid, revision)
        self.started.append(name)
        await self._status(pod, slot, "Running", ready=True,
                           state={"running": {"startedAt": now()}})
        assert proc.proc is not None
        code = await proc.proc.wait()
        if self.running.get(name) is not None and self.running[name].uid == slot.uid:
            del self.running[name]
        if not slot.stopping:
            current = self._pod(name, slot.uid)
            if current is not None:
                await self._status(current, slot, "Running", ready=False, state={
                    "terminated": {"exitCode": code, "reason": "Error" if code else
                                   "Completed", "finishedAt": now()}})
            self._wake.set()

    async def _start_process(self, pod: Obj) -> Proc:
        name, spec = pod["metadata"]["name"], pod["spec"]
        config_map = Container.of(spec).config_map
        data = await self.api.get_path(
            f"/api/v1/namespaces/{self.namespace}/configmaps/{quote(config_map)}")
        if data is None:
            raise RuntimeError(f"ConfigMap {config_map} not found")
        index = pod["metadata"].get("labels", {}).get(
            "apps.kubernetes.io/pod-index", name.rsplit("-", 1)[1])
        ordinal = int(index) if index.isdigit() else 0  # a Deployment's pod: no ordinal
        root = self.volumes[name] = await self._volume(pod)
        statefulsets = self.mirror.all("apps/v1/statefulsets")
        proc = await start_process(name, ordinal, spec, data.get("data") or {}, root,
                                   self.ip_of(name), self.addresses.hosts(statefulsets))
        self._procs.append(proc)
        return proc

    async def _volume(self, pod: Obj) -> Path:
        """The pod's data directory: its first claim's, by the claim's uid."""
        claim = next((v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"]
                      if "persistentVolumeClaim" in v), None)
        if claim is None:
            return self.workdir / f"{pod['metadata']['name']}-{pod['metadata']['uid'][:8]}"
        pvc = await self.api.get_path(
            f"/api/v1/namespaces/{self.namespace}/persistentvolumeclaims/{quote(claim)}")
        if pvc is None:
            raise RuntimeError(f"PersistentVolumeClaim {claim} not found")
        return self.workdir / f"{claim}-{pvc['metadata']['uid'][:8]}"

    def data_dir(self, pod: str) -> Path:
        """The data directory ``pod`` was last started on."""
        if pod not in self.volumes:
            raise FileNotFoundError(f"{pod} has not been started: no data directory yet")
        return self.volumes[pod]

    async def _status(self, pod: Obj, slot: Slot, phase: str, ready: bool,
                      state: Obj) -> None:
        container = pod["spec"]["containers"][0]
        stamp = now()
        running = "running" in state

        def cond(kind: str, ok: bool) -> Obj:
            return {"type": kind, "status": "True" if ok else "False",
                    "lastTransitionTime": stamp}

        status = {
            "phase": phase, "hostIP": "127.0.0.1",
            "podIP": self.ip_of(pod["metadata"]["name"]),
            "podIPs": [{"ip": self.ip_of(pod["metadata"]["name"])}],
            "startTime": pod.get("status", {}).get("startTime") or stamp,
            "conditions": [cond("PodScheduled", True), cond("Initialized", phase != "Pending"),
                           cond("ContainersReady", ready), cond("Ready", ready)],
            "containerStatuses": [{
                "name": container["name"], "image": container["image"],
                "imageID": "", "containerID": f"local://{slot.uid}-{slot.restarts}",
                "ready": ready, "started": running, "restartCount": slot.restarts,
                "state": state}],
        }
        try:
            await self.api.request(
                "PATCH",
                f"/api/v1/namespaces/{self.namespace}/pods/{quote(pod['metadata']['name'])}"
                "/status", body={"status": status},
                content_type="application/merge-patch+json")
        except ApiError as exc:
            if exc.status != 404:  # gone: nothing to report
                self.errors.append(f"status of {pod['metadata']['name']}: {exc}")
                raise

    # ---- for tests

    async def kill(self, pod: str) -> None:
        """SIGKILL the pod's process (the agent restarts it, as restartPolicy Always)."""
        await self.running[pod].proc.kill()

    async def hold(self, pod: str) -> Path:
        """Stops ``pod``'s process until ``release`` (the Pod object stays, not Ready);
        returns its data directory."""
        self.held.add(pod)
        slot = self.slots.get(pod)
        if slot is not None and slot.proc is not None:
            slot.stopping = True
            await slot.proc.terminate(timeout=10)
            if slot.task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await slot.task
            slot.stopping = False
            current = self._pod(pod, slot.uid)
            if current is not None:
                await self._status(current, slot, "Running", ready=False, state={
                    "terminated": {"exitCode": 0, "reason": "Completed",
                                   "finishedAt": now()}})
        return self.data_dir(pod)

    def release(self, pod: str) -> None:
        self.held.discard(pod)
        self._wake.set()
