"""A rolling upgrade of a 3-replica controller-mode group on real processes, with a producer
running throughout: the scenario of ``test_upgrade_full_loop`` and ``python -m bench upgrade``.

kopf runs the operator against the real control plane, whose StatefulSet controller makes
the pods and the node agent runs them as ``mqnamesrv`` (with the controller embedded) and
``mqbroker`` processes; without a control plane (``python -m bench upgrade``), against the
emulator with the local kubelet. Once the group
is up (allAckInSyncStateSet: a write is acknowledged when every SyncStateSet member has
it), a producer sends one message at a time, retrying each until it is acknowledged,
while ``spec.version`` changes. Then every message is consumed and compared with the
acknowledged ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqcluster.client.admin import AdminClient
from mqcluster.client.consumer import PullConsumer
from mqcluster.client.message import Message
from mqcluster.client.producer import Producer
from mqcluster_operator.follow.election_probes import ProbeTarget, default_probe
from mqcluster_operator.follow.upgrade_driver import AdminUpgradeDriver
from mqcluster_operator.k8s import Ref

from .kopf_harness import Harness, running_operator
from .kubelet import LocalKubelet
from .realplane.cluster import real_cluster
from .realplane.controlplane import Kube
from .realplane.node_agent import NodeAgent

NS = "upgrade"
BG = "brokergroups.v1alpha1.mqcluster.io"
TOPIC, GROUP = "UpgradeTopic", "UpgradeGroup"
IP_BASE = 170


@dataclass
class UpgradeRun:
    started: list[str] = field(default_factory=list)
    """Pod starts of the kubelet after the version change, in order."""
    masters: list[str] = field(default_factory=list)
    """status.masterPod as it changed during the upgrade."""
    upgrading: list[tuple[str, str, str]] = field(default_factory=list)
    """(status, reason, message) of the Upgrading condition as it changed."""
    progress: list[str] = field(default_factory=list)
    phases: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    acked: list[str] = field(default_factory=list)
    acked_at: list[float] = field(default_factory=list)
    """time.monotonic() of each acknowledgement."""
    attempts: int = 0
    consumed: set[str] = field(default_factory=set)
    longest_gap: float = 0.0
    """Seconds: the longest time between two acknowledged sends while the upgrade ran."""
    seconds: float = 0.0
    """Seconds from the version change to Upgrading=False/UpToDate."""

    @property
    def lost(self) -> list[str]:
        return [m for m in self.acked if m not in self.consumed]


class Loop:
    def __init__(self, h: Harness, kubelet: LocalKubelet | NodeAgent) -> None:
        self.h, self.kubelet = h, kubelet
        self.ns = kubelet.namespace

    def status(self) -> dict[str, Any]:
        return (self.h.obj(BG, "bg", self.ns) or {}).get("status") or {}

    def upgrading(self) -> tuple[str, str, str] | None:
        for cond in self.status().get("conditions") or []:
            if cond["type"] == "Upgrading":
                return cond["status"], cond.get("reason", ""), cond.get("message", "")
        return None

    @property
    def namesrv(self) -> str:
        return f"{self.kubelet.ip_of('mqc-0')}:9876"

    def master_addr(self) -> str:
        return self.kubelet.resolve(str(self.status()["masterAddress"]))

    def describe(self) -> str:
        return f"status {self.status()}; running {sorted(self.kubelet.running)};" \
               f" started {self.kubelet.started}"


@contextlib.asynccontextmanager
async def running(workdir: Path, kube: Kube | None = None, agent: NodeAgent | None = None,
                  **intervals: Any) -> Any:
    """The operator and the pods: on the real control plane with ``kube`` and ``agent``,
    else on the emulator with the local kubelet."""
    holder: dict[str, LocalKubelet | NodeAgent] = {}

    def probes(target: ProbeTarget) -> Any:
        k = holder["kubelet"]
        return default_probe(ProbeTarget(
            tuple(k.resolve(a) for a in target.controller_addrs),
            tuple((k.resolve(a), k.resolve(u)) for a, u in target.health)))

    def resolve(address: str) -> str:
        return holder["kubelet"].resolve(address)

    cluster = real_cluster(kube, agent.mirror) if kube and agent else None
    try:
        async with running_operator(probe_factory=probes, cluster=cluster,
                                    upgrade_driver=AdminUpgradeDriver(resolve),
                                    **intervals) as h:
            # away from the addresses other full-loop tests take (they may run at once)
            kubelet = agent or LocalKubelet(h.api, h.emulator, NS, workdir,  # type: ignore[arg-type]
                                            ip_base=IP_BASE)
            holder["kubelet"] = kubelet
            if agent is None:
                await kubelet.start()
            try:
                yield Loop(h, kubelet)
            except BaseException:
                for pod in sorted(kubelet.running):
                    print(f"--- {pod}\n{kubelet.running[pod].proc.log_tail(15)}")
                raise
            finally:
                if agent is None:
                    await kubelet.close()
    finally:
        if cluster is not None:
            await cluster.api.close()


async def produce(namesrv: str, run: UpgradeRun, stop: asyncio.Event) -> None:
    """One message at a time; each is retried until acknowledged (a retry after a lost
    answer may store it twice, which the check allows: only acknowledged ones count)."""
    async with Producer(namesrv_addr=namesrv, retries=0, timeout=3.0) as producer:
        i = 0
        while not stop.is_set():
            body = f"m{i}"
            while True:
                run.attempts += 1
                try:
                    await producer.send(Message(TOPIC, body.encode()))
                    break
                except Exception:
                    producer.routes.invalidate(TOPIC)
                    await asyncio.sleep(0.05)
            run.acked.append(body)
            run.acked_at.append(time.monotonic())
            i += 1


async def consume(namesrv: str, want: set[str]) -> set[str]:
    got: set[str] = set()
    async with PullConsumer(GROUP, namesrv_addr=namesrv) as consumer:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(60):
                while not want <= got:
                    got.update(m.body.decode() for m in
                               await consumer.receive(TOPIC, wait_ms=200))
    return got


async def create_group(loop: Loop, mode: str = "Controller") -> None:
    """The Controller (the name server) and a 3-replica group, up with a full SyncStateSet
    (controller mode) or a leader (DLedger)."""
    h = loop.h
    group: dict[str, Any] = {"mode": mode, "replicas": 3, "controllerRef": {"name": "mqc"},
                             "upgradePolicy": {"maxLagBytes": 0}}
    if mode == "Controller":
        group["allAckInSyncStateSet"] = True
    await h.api.create({"apiVersion": "mqcluster.io/v1alpha1", "kind": "Controller",
                        "metadata": {"name": "mqc", "namespace": loop.ns},
                        "spec": {"replicas": 1, "deployment": "EmbeddedInNamesrv"}})
    await h.api.create({"apiVersion": "mqcluster.io/v1alpha1", "kind": "BrokerGroup",
                        "metadata": {"name": "bg", "namespace": loop.ns},
                        "spec": group})
    await h.eventually(lambda: loop.status().get("phase") == "Running"
                       and loop.status().get("masterPod")
                       and len(loop.status().get("syncStateSet") or []) == 3,
                       timeout=120, what=lambda: f"the group running: {loop.describe()}")


async def set_version(loop: Loop, version: str) -> None:
    await loop.h.api.patch(Ref("mqcluster.io/v1alpha1", "BrokerGroup", loop.ns, "bg"),
                           {"spec": {"version": version}})


async def upgrade_with_producer(loop: Loop, mode: str = "Controller") -> UpgradeRun:
    h = loop.h
    await create_group(loop, mode)
    master = loop.master_addr()
    async with AdminClient(broker_addr=master) as admin:
        await admin.create_topic(TOPIC, 4, broker_addr=master)
        await admin.create_subscription_group(GROUP, broker_addr=master)

    run = UpgradeRun()
    stop = asyncio.Event()
    producer = asyncio.create_task(produce(loop.namesrv, run, stop))
    await h.eventually(lambda: len(run.acked) >= 20, timeout=60, what="the producer going")
    before = len(loop.kubelet.started)
    acked_before = len(run.acked_at)
    start = time.monotonic()
    await set_version(loop, "0.2.0")

    def observe() -> bool:
        status = loop.status()
        for seen, value in ((run.masters, status.get("masterPod")),
                            (run.upgrading, loop.upgrading()),
                            (run.progress, (status.get("upgrade") or {}).get("progress")),
                            (run.phases, status.get("phase"))):
            if value and (not seen or seen[-1] != value):
                seen.append(value)  # type: ignore[arg-type]
        cond = loop.upgrading()
        return len(loop.kubelet.started) >= before + 3 and cond is not None \
            and cond[:2] == ("False", "UpToDate")

    try:
        await h.eventually(observe, timeout=240, what=loop.describe)
        run.seconds = time.monotonic() - start
        await asyncio.sleep(0.5)  # a few acknowledged sends on the upgraded group
    finally:
        stop.set()
        await producer
    times = run.acked_at[acked_before - 1:]
    run.longest_gap = max((b - a for a, b in itertools.pairwise(times)), default=0.0)
    run.started = loop.kubelet.started[before:]
    run.events = [e["message"] for e in h.events("Upgrade", loop.ns)]
    run.consumed = await consume(loop.namesrv, set(run.acked))
    return run


def report(run: UpgradeRun) -> str:
    return (f"upgrade of 3 replicas in {run.seconds:.1f} s; pods started {run.started};"
            f" masters {run.masters}; {len(run.acked)} acknowledged of {run.attempts} attempts,"
            f" {len(run.lost)} lost; longest gap between acknowledged writes"
            f" {run.longest_gap * 1000:.0f} ms")
