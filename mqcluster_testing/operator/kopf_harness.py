"""Run the operator in-process (kopf) against the emulator, with a fake ControllerProbe
(and fake brokers for the upgrade driver) unless real ones are given."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import kmock
import kopf

from mqcluster.protocol.election import Election
from mqcluster_operator import handlers
from mqcluster_operator.applied import AppliedCache
from mqcluster_operator.follow.election_plan import ControllerMeta, ProbeError
from mqcluster_operator.follow.election_probes import ProbeTarget
from mqcluster_operator.k8s import Api

from .emulator import TEST_CLIENT, Emulator

NOW = "2026-01-01T00:00:00Z"


@dataclass
class FakeCluster:
    """What the fake probes of one namespace report; tests change it to simulate elections."""

    election: Election = field(default_factory=lambda: Election(None))
    meta: ControllerMeta = field(default_factory=lambda: ControllerMeta(None, None))
    failing: bool = False
    switchovers: list[tuple[str, str, int]] = field(default_factory=list)
    offsets: dict[str, int] = field(default_factory=dict)
    """Commitlog max offset per pod the fake brokers report (0 when unset)."""
    transfers: list[tuple[str, str]] = field(default_factory=list)
    config_updates: list[tuple[str, dict[str, str]]] = field(default_factory=list)


@dataclass
class FakeClusters:
    """One FakeCluster per namespace, found from the probe target's pod DNS names."""

    by_namespace: dict[str, FakeCluster] = field(default_factory=dict)

    def __call__(self, namespace: str) -> FakeCluster:
        return self.by_namespace.setdefault(namespace, FakeCluster())

    def factory(self, target: ProbeTarget) -> FakeProbe:
        address = (target.controller_addrs or tuple(a for a, _ in target.health))[0]
        return FakeProbe(self(address.split(".")[2]))


@dataclass
class FakeProbe:
    cluster: FakeCluster

    async def metadata(self) -> ControllerMeta:
        if self.cluster.failing:
            raise ProbeError("unreachable")
        return self.cluster.meta

    async def election(self, cluster: str, broker_name: str) -> Election:
        if self.cluster.failing:
            raise ProbeError("unreachable")
        return self.cluster.election

    async def elections(self, broker_names: Sequence[str]) -> dict[str, Election]:
        if self.cluster.failing:
            raise ProbeError("unreachable")
        return {name: self.cluster.election for name in broker_names}

    async def switchover(self, cluster: str, broker_name: str, broker_id: int) -> None:
        self.cluster.switchovers.append((cluster, broker_name, broker_id))

    async def close(self) -> None:
        pass



@dataclass
class FakeUpgradeDriver:
    """The brokers of the fake clusters, for the upgrade follower (addresses name pods)."""

    clusters: FakeClusters

    def _cluster(self, address: str) -> FakeCluster:
        return self.clusters(address.split(".")[2])

    async def max_offsets(self, brokers: Sequence[str]) -> dict[str, int]:
        return {b: self._cluster(b).offsets.get(b.split(".")[0], 0) for b in brokers}

    async def transfer_leadership(self, leader: str, peer_id: str) -> None:
        self._cluster(leader).transfers.append((leader.split(".")[0], peer_id))

    async def update_config(self, brokers: Sequence[str], changes: Mapping[str, str]) -> list[str]:
        for broker in brokers:
            self._cluster(broker).config_updates.append((broker.split(".")[0], dict(changes)))
        return []


class ObjectStore(Protocol):
    """The objects as the tests read them: the emulator's own, or the real control
    plane's as watched (realplane.mirror.Mirror)."""

    def live(self, plural: str, namespace: str | None, name: str) -> dict[str, Any] | None: ...

    def all(self, plural: str) -> list[dict[str, Any]]: ...


@dataclass
class Harness:
    emulator: ObjectStore
    api: Api
    fake: FakeClusters

    async def eventually(
        self, check: Callable[[], Any], timeout: float = 30.0,
        what: str | Callable[[], str] = "condition",
    ) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            result = check()
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what() if callable(what) else what}")
            await asyncio.sleep(0.05)

    def obj(self, plural: str, name: str, namespace: str) -> dict[str, Any] | None:
        return self.emulator.live(plural, namespace, name)

    def events(self, reason: str, namespace: str) -> list[dict[str, Any]]:
        return [
            e for e in self.emulator.all("v1/events")
            if e.get("reason") == reason and e["metadata"].get("namespace") == namespace
        ]


@dataclass
class Cluster:
    """An API server that may outlive one operator run (a restarted operator finds the
    same objects): the emulator, or the real control plane (realplane.cluster)."""

    emulator: ObjectStore
    url: str
    api: Api
    connection: kopf.ConnectionInfo | None = None
    """The operator's credentials (the emulator needs none)."""


@contextlib.asynccontextmanager
async def emulated_cluster() -> AsyncIterator[Cluster]:
    async with Emulator() as emulator, kmock.Server(emulator) as server:
        url = str(server.url).rstrip("/")
        api = Api(kopf.ConnectionInfo(server=url), user_agent=TEST_CLIENT)
        try:
            yield Cluster(emulator, url, api)
        finally:
            await api.close()


@contextlib.asynccontextmanager
async def running_operator(
    probe_factory: Callable[[ProbeTarget], Any] | None = None,
    follow_interval: float = 0.1, poll_interval: float = 0.05, reconcile_interval: float = 1.0,
    reapply_seconds: float = 0.0, cluster: Cluster | None = None, **memo_extra: Any,
) -> AsyncIterator[Harness]:
    """kopf with our handlers against ``cluster`` (a fresh emulator unless given); probes
    are fakes unless given. The intervals are short for tests; the bench passes the
    production ones. Leaving the context stops the operator, as a pod deletion would."""
    if cluster is None:
        async with emulated_cluster() as fresh, running_operator(
                probe_factory, follow_interval, poll_interval, reconcile_interval,
                reapply_seconds, fresh, **memo_extra) as h:
            yield h
        return
    fake = FakeClusters()
    connection = cluster.connection or kopf.ConnectionInfo(server=cluster.url)
    registry = kopf.OperatorRegistry()
    handlers.register(registry, reconcile_interval=reconcile_interval, backoff=0.5)
    settings = kopf.OperatorSettings()
    settings.watching.reconnect_backoff = 0.1
    settings.queueing.idle_timeout = 1.0
    settings.background.instant_exit_timeout = 0.5
    settings.background.cancellation_polling = 0.5
    settings.posting.enabled = False
    memo = kopf.Memo(
        connect=lambda **_: connection,
        probe_factory=probe_factory or fake.factory,
        **({} if probe_factory else {"upgrade_driver": FakeUpgradeDriver(fake)}),
        applied=AppliedCache(reapply_seconds),
        follow_interval=follow_interval,
        poll_interval=poll_interval,
        clock=lambda: NOW,
        **memo_extra,
    )
    # kopf runs in its own thread and loop: at exit it waits for every task of its
    # loop, and the emulator's server-side watch streams must not be among them.
    stop = threading.Event()
    thread = threading.Thread(
        target=asyncio.run,
        args=(kopf.operator(
            registry=registry, settings=settings, memo=memo, clusterwide=True,
            standalone=True, stop_flag=stop,
        ),),
        name="kopf",
        daemon=True,
    )
    thread.start()
    try:
        yield Harness(cluster.emulator, cluster.api, fake)
    finally:
        stop.set()
        await asyncio.to_thread(thread.join, 15)
