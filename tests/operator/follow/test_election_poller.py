"""The shared election poll: one request for all groups of a target, wake-ups, backoff."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from mqcluster.protocol.election import Election
from mqcluster_operator.follow.election_plan import ControllerMeta, ProbeError
from mqcluster_operator.follow.election_poller import ElectionHub, SharedPoller
from mqcluster_operator.follow.election_probes import ProbeTarget

pytestmark = pytest.mark.timeout(30)


@dataclass
class CountingProbe:
    masters: dict[str, str] = field(default_factory=dict)
    failing: bool = False
    calls: list[tuple[str, ...]] = field(default_factory=list)
    closed: bool = False

    async def metadata(self) -> ControllerMeta:
        return ControllerMeta(None, None)

    async def election(self, cluster: str, broker_name: str) -> Election:
        return (await self.elections([broker_name]))[broker_name]

    async def elections(self, broker_names: Sequence[str]) -> dict[str, Election]:
        self.calls.append(tuple(broker_names))
        if self.failing:
            raise ProbeError("unreachable")
        return {n: Election(self.masters.get(n), 1) for n in broker_names}

    async def switchover(self, cluster: str, broker_name: str, broker_id: int) -> None:
        pass

    async def close(self) -> None:
        self.closed = True


async def test_one_request_for_every_group_and_only_changed_groups_wake() -> None:
    probes: list[CountingProbe] = []

    def factory(target: ProbeTarget) -> CountingProbe:
        probes.append(CountingProbe({"a": "a-0:1", "b": "b-0:1"}))
        return probes[-1]

    hub = ElectionHub(factory, interval=0.02)
    target = ProbeTarget(controller_addrs=("c-0:9878",))
    a, b = hub.subscribe(target, "a"), hub.subscribe(target, "b")
    await asyncio.wait_for(a.changed.wait(), 5)
    await asyncio.wait_for(b.changed.wait(), 5)
    assert len(probes) == 1
    assert ("a", "b") in probes[0].calls
    assert all(len(call) <= 2 for call in probes[0].calls)
    a.changed.clear()
    b.changed.clear()
    probes[0].masters["a"] = "a-1:1"
    await asyncio.wait_for(a.changed.wait(), 5)
    latest = a.latest
    assert isinstance(latest, Election) and latest.master_address == "a-1:1"
    await asyncio.sleep(0.1)
    assert not b.changed.is_set()
    await a.close()
    assert not probes[0].closed
    await b.close()
    assert probes[0].closed and not hub.pollers


async def test_errors_back_off_and_recovery_wakes_everyone() -> None:
    probe = CountingProbe({"a": "a-0:1"})
    poller = SharedPoller(probe, interval=0.01, max_backoff=0.16)
    sub = poller.subscribe("a")
    await asyncio.wait_for(sub.changed.wait(), 5)
    sub.changed.clear()
    probe.failing = True
    await asyncio.wait_for(sub.changed.wait(), 5)
    assert isinstance(sub.latest, ProbeError)
    sub.changed.clear()
    await asyncio.sleep(0.5)
    assert poller.delay() == pytest.approx(0.16)
    failed_calls = poller.failures
    assert failed_calls < 10, "no backoff"
    assert not sub.changed.is_set(), "the same error again wakes nobody"
    probe.failing = False
    await asyncio.wait_for(sub.changed.wait(), 5)
    assert isinstance(sub.latest, Election)
    await sub.close()
