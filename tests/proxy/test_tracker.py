"""The master tracker: what the forwarding handler is told, and when."""

from __future__ import annotations

from mqcluster.broker.context import ReplicaRole
from mqcluster.proxy.master_source import MasterSighting
from mqcluster.proxy.tracker import MasterTracker


class ScriptedSource:
    def __init__(self) -> None:
        self.answer: MasterSighting | Exception = MasterSighting(None, 0)
        self.closed = False

    async def master(self) -> MasterSighting:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    async def close(self) -> None:
        self.closed = True


def tracker(source: ScriptedSource, grpc_of: dict[str, str]) -> tuple[MasterTracker, list]:
    async def resolve(addr: str) -> str | None:
        if addr not in grpc_of:
            raise ConnectionError(f"{addr} does not answer")
        return grpc_of[addr]

    t = MasterTracker(source, resolve, 0.1)
    changes: list[tuple[ReplicaRole, ReplicaRole]] = []
    t.listeners.append(lambda old, new: changes.append((old, new)))
    return t, changes


async def test_a_new_master_is_announced_with_its_grpc_endpoint() -> None:
    source = ScriptedSource()
    t, changes = tracker(source, {"b1:10911": "b1:8081", "b2:10911": "b2:8081"})
    await t.poll_once()
    assert t.role().master_grpc is None and changes == []
    source.answer = MasterSighting("b1:10911", 1)
    await t.poll_once()
    await t.poll_once()
    assert t.role().master_grpc == "b1:8081" and not t.role().is_master
    assert len(changes) == 1
    source.answer = MasterSighting("b2:10911", 2)
    await t.poll_once()
    assert [new.master_grpc for _, new in changes] == ["b1:8081", "b2:8081"]


async def test_an_older_epoch_never_replaces_a_newer_master() -> None:
    source = ScriptedSource()
    t, changes = tracker(source, {"b1:10911": "b1:8081", "b2:10911": "b2:8081"})
    source.answer = MasterSighting("b2:10911", 5)
    await t.poll_once()
    source.answer = MasterSighting("b1:10911", 4)  # a controller that lags behind
    await t.poll_once()
    assert t.role().master_grpc == "b2:8081" and len(changes) == 1


async def test_a_master_that_cannot_be_asked_is_taken_on_a_later_round() -> None:
    source = ScriptedSource()
    grpc_of: dict[str, str] = {}
    t, changes = tracker(source, grpc_of)
    source.answer = MasterSighting("b1:10911", 1)
    await t.poll_once()
    assert t.role().master_grpc is None and changes == []
    grpc_of["b1:10911"] = "b1:8081"
    await t.poll_once()
    assert t.role().master_grpc == "b1:8081"


async def test_a_source_that_names_the_endpoint_is_not_asked_again() -> None:
    source = ScriptedSource()
    t, _ = tracker(source, {})
    source.answer = MasterSighting("b1:10911", 0, grpc="b1:8081")
    await t.poll_once()
    assert t.role().master_grpc == "b1:8081"


async def test_stop_closes_the_source() -> None:
    source = ScriptedSource()
    source.answer = ConnectionError("no controller")
    t, changes = tracker(source, {})
    t.start()
    await t.stop()
    assert source.closed and changes == []
