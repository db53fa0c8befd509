"""The whole loop on the real control plane: kopf against the real API server, the real
StatefulSet controller's pods run as real processes by the node agent, a DLedger group
with a topic, a subscription group and a consumer migrated to controller mode by
changing ``spec.mode``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from mqcluster.client import broker_ops
from mqcluster.client.admin import AdminClient
from mqcluster.client.consumer import PullConsumer
from mqcluster.client.message import Message
from mqcluster.client.producer import Producer
from mqcluster.client.route import NoRouteError
from mqcluster_operator.follow.election_probes import ProbeTarget, default_probe
from mqcluster_operator.follow.epochs_plan import ReplicaEpochs
from mqcluster_operator.follow.migration_driver import AdminDriver
from mqcluster_operator.k8s import Ref
from mqcluster_testing.operator.kopf_harness import Cluster, FakeClusters, Harness, running_operator
from mqcluster_testing.operator.realplane.cluster import real_cluster
from mqcluster_testing.operator.realplane.controlplane import Kube
from mqcluster_testing.operator.realplane.node_agent import NodeAgent

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

BG = "brokergroups.v1alpha1.mqcluster.io"
TOPIC, GROUP = "LoopTopic", "LoopGroup"


@dataclass
class ResolvingDriver:
    kubelet: NodeAgent
    inner: AdminDriver

    async def set_writes(self, brokers: Sequence[str], on: bool) -> None:
        await self.inner.set_writes([self.kubelet.resolve(b) for b in brokers], on)

    async def lag(self, broker: str) -> int | None:
        return await self.inner.lag(self.kubelet.resolve(broker))

    async def metadata_behind(self, leader: str, followers: Sequence[str]) -> list[str] | None:
        resolved = {self.kubelet.resolve(f): f for f in followers}
        behind = await self.inner.metadata_behind(self.kubelet.resolve(leader), list(resolved))
        return None if behind is None else [resolved[b] for b in behind]

    async def epochs(self, brokers: Sequence[str]) -> dict[str, ReplicaEpochs]:
        resolved = {self.kubelet.resolve(b): b for b in brokers}
        answers = await self.inner.epochs(list(resolved))
        return {resolved[a]: e for a, e in answers.items()}

    async def retire(self, controllers: Sequence[str], namesrvs: Sequence[str], cluster: str,
                     broker_name: str, broker_ids: Sequence[int],
                     addresses: Sequence[str]) -> None:
        await self.inner.retire([self.kubelet.resolve(c) for c in controllers],
                                [self.kubelet.resolve(n) for n in namesrvs], cluster,
                                broker_name, broker_ids,
                                [self.kubelet.resolve(a) for a in addresses])


@dataclass
class Loop:
    h: Harness
    kubelet: NodeAgent
    cluster: Cluster
    driver: ResolvingDriver
    operator: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)

    @property
    def ns(self) -> str:
        return self.kubelet.namespace

    @property
    def bg(self) -> Ref:
        return Ref("mqcluster.io/v1alpha1", "BrokerGroup", self.ns, "bg")

    def status(self) -> dict[str, Any]:
        return (self.h.obj(BG, "bg", self.ns) or {}).get("status") or {}

    async def create_group(self, mode: str, **spec: Any) -> None:
        """A Controller ``mqc`` (embedded in one name server) and a BrokerGroup ``bg`` of 3."""
        await self.h.api.create({"apiVersion": "mqcluster.io/v1alpha1", "kind": "Controller",
                                 "metadata": {"name": "mqc", "namespace": self.ns},
                                 "spec": {"replicas": 1, "deployment": "EmbeddedInNamesrv"}})
        await self.h.api.create({"apiVersion": "mqcluster.io/v1alpha1", "kind": "BrokerGroup",
                                 "metadata": {"name": "bg", "namespace": self.ns},
                                 "spec": {"mode": mode, "replicas": 3,
                                          "controllerRef": {"name": "mqc"}, **spec}})

    def step(self) -> str | None:
        return (self.status().get("migration") or {}).get("step")

    @property
    def namesrv(self) -> str:
        return f"{self.kubelet.ip_of('mqc-0')}:9876"

    def describe(self) -> str:
        pods = sorted(p["metadata"]["name"] for p in self.h.emulator.all("v1/pods"))
        return f"Done; status {self.status()}; pods {pods}; running {sorted(self.kubelet.running)}"

    def master_addr(self) -> str:
        return self.kubelet.resolve(str(self.status()["masterAddress"]))

    def probes(self, target: ProbeTarget) -> Any:
        k = self.kubelet
        return default_probe(ProbeTarget(
            tuple(k.resolve(a) for a in target.controller_addrs),
            tuple((k.resolve(a), k.resolve(u)) for a, u in target.health)))

    async def start_operator(self) -> None:
        await self.operator.enter_async_context(running_operator(
            probe_factory=self.probes, migration_driver=self.driver, cluster=self.cluster))

    async def restart_operator(self) -> None:
        """Stops the operator (its memory goes with it) and starts a new one; the
        API server and the pods' processes go on."""
        await self.operator.aclose()
        self.operator = contextlib.AsyncExitStack()
        await self.start_operator()


@pytest.fixture
async def loop(kube: Kube, node_agent: NodeAgent) -> AsyncIterator[Loop]:
    async with running_loop(kube, node_agent) as the_loop:
        yield the_loop


@contextlib.asynccontextmanager
async def running_loop(kube: Kube, agent: NodeAgent) -> AsyncIterator[Loop]:
    """The operator (restartable) on the real control plane; the node agent runs the pods
    of its namespace."""
    cluster = real_cluster(kube, agent.mirror)
    harness = Harness(cluster.emulator, cluster.api, FakeClusters())
    the_loop = Loop(harness, agent, cluster, ResolvingDriver(agent, AdminDriver()))
    try:
        await the_loop.start_operator()
        yield the_loop
    except BaseException:
        for pod in sorted(agent.running):
            print(f"--- {pod}\n{agent.running[pod].proc.log_tail(15)}")
        raise
    finally:
        await the_loop.operator.aclose()
        await cluster.api.close()


async def send(namesrv: str, bodies: list[str], topic: str = TOPIC) -> None:
    """Sends each body once (no retries); waits for the topic's route to reach the name
    server first (brokers register new topics asynchronously)."""
    async with Producer(namesrv_addr=namesrv, retries=0) as producer:
        async with asyncio.timeout(30):
            while True:
                try:
                    await producer.routes.route(topic, for_write=True)
                    break
                except NoRouteError:
                    producer.routes.invalidate(topic)
                    await asyncio.sleep(0.2)
        for body in bodies:
            async with asyncio.timeout(30):
                while True:
                    try:
                        await producer.send(Message(topic, body.encode()))
                        break
                    except NoRouteError:  # (nothing was sent: the route came back empty
                        # while the group re-registered; sending again is no duplicate)
                        producer.routes.invalidate(topic)
                        await asyncio.sleep(0.2)


async def consume(namesrv: str, want: int) -> int:
    got = 0
    async with PullConsumer(GROUP, namesrv_addr=namesrv) as consumer:
        async with asyncio.timeout(30):
            while got < want:
                got += len(await consumer.receive(TOPIC, wait_ms=200))
        for queue, offset in consumer.positions.items():
            await consumer.commit_offset(queue, offset)
    return got


async def dledger_group_with_a_topic(loop: Loop) -> None:
    h = loop.h
    await loop.create_group("DLedger")
    await h.eventually(lambda: loop.status().get("masterPod") and loop.status().get("phase")
                       == "Running", timeout=90, what="the DLedger group running")
    leader = loop.master_addr()
    async with AdminClient(broker_addr=leader) as admin:
        await admin.create_topic(TOPIC, 4, broker_addr=leader)
        await admin.create_subscription_group(GROUP, broker_addr=leader)


async def test_changing_spec_mode_migrates_a_dledger_group_to_controller_mode(loop: Loop) -> None:
    h = loop.h
    await dledger_group_with_a_topic(loop)
    await send(loop.namesrv, [f"m{i}" for i in range(30)])
    first = await consume(loop.namesrv, 10)
    assert 10 <= first <= 30

    await h.api.patch(loop.bg,
                      {"spec": {"mode": "Controller"}})
    await h.eventually(lambda: loop.step() == "Draining", what="Draining")
    await h.eventually(lambda: "left to consume" in (loop.status().get("migration") or {})
                       .get("progress", ""), what="drain progress")
    assert loop.status()["appliedMode"] == "DLedger"
    if first < 30:
        assert await consume(loop.namesrv, 30 - first) == 30 - first  # the lag reaches 0
    await h.eventually(lambda: loop.step() in ("Stopping", "Restarting", "Done"),
                       what="drained")
    await h.eventually(lambda: loop.step() == "Done", timeout=120, what=loop.describe)

    status = loop.status()
    assert status["appliedMode"] == "Controller"
    migrating = next(c for c in status["conditions"] if c["type"] == "Migrating")
    assert (migrating["status"], migrating["reason"]) == ("False", "Completed")
    # The event follows the status write that the test has just seen.
    messages = await h.eventually(lambda: [e["message"] for e in h.events("Migration", loop.ns)
                                           if "migration completed" in e["message"]]
                                  and [e["message"] for e in h.events("Migration", loop.ns)],
                                  what="the completion event")
    assert any("started: writes off" in m for m in messages)
    await assert_migrated_keeping_the_topic(loop)


async def assert_migrated_keeping_the_topic(loop: Loop) -> None:
    status = loop.status()
    assert status["appliedMode"] == "Controller"
    assert len(status["syncStateSet"]) == 3
    master = loop.master_addr()
    async with AdminClient(broker_addr=master) as admin:
        assert (await admin.topic_configs(master))[TOPIC].writeQueueNums == 4
    # Every replica kept them: whichever one the controller elects next serves the topic.
    for pod in ("bg-0", "bg-1", "bg-2"):
        tables = await broker_ops.metadata_tables(f"{loop.kubelet.ip_of(pod)}:10911")
        assert TOPIC in tables["topics"] and GROUP in tables["groups"], pod
    await send(loop.namesrv, [f"after{i}" for i in range(10)])
    assert await consume(loop.namesrv, 10) == 10


async def test_an_operator_restarted_while_draining_and_while_restarting_resumes(
        loop: Loop) -> None:
    h = loop.h
    await dledger_group_with_a_topic(loop)
    await send(loop.namesrv, [f"m{i}" for i in range(20)])
    first = await consume(loop.namesrv, 1)
    await send(loop.namesrv, [f"n{i}" for i in range(10)])  # lag stays above 0 until consumed

    await h.api.patch(loop.bg,
                      {"spec": {"mode": "Controller"}})
    await h.eventually(lambda: "left to consume" in (loop.status().get("migration") or {})
                       .get("progress", ""), what="drain progress")
    started = loop.status()["migration"]
    await loop.restart_operator()
    assert loop.step() == "Draining"
    assert await consume(loop.namesrv, 30 - first) == 30 - first
    await h.eventually(lambda: loop.step() in ("Stopping", "Restarting"), timeout=60,
                       what="Stopping or Restarting")
    await loop.restart_operator()
    await h.eventually(lambda: loop.step() == "Done", timeout=120, what=loop.describe)

    assert loop.status()["migration"]["id"] == started["id"]  # the same migration, resumed
    messages = await h.eventually(lambda: [e["message"] for e in h.events("Migration", loop.ns)
                                           if "migration completed" in e["message"]]
                                  and [e["message"] for e in h.events("Migration", loop.ns)],
                                  what="the completion event")
    assert sum("started: writes off" in m for m in messages) == 1
    assert sum("migration completed" in m for m in messages) == 1
    await assert_migrated_keeping_the_topic(loop)
