"""The DLedger verdict on replicas, from stores written by the same state machine the
brokers run: stopped one after another, a replica may lack the leader's last entries,
never a workload message, and never differ below where it ends."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from chaos.cluster import TOPIC
from chaos.dledger_mode import DLedgerCluster
from chaos.netns import Network
from chaos.process import HostProcess
from mqcluster.broker.dledger_builder import EntryBuilder
from mqcluster.ha.dledger_entry import mark_positions
from mqcluster.store import MessageStore
from mqcluster.store.batch import RawBatch, check_batch
from mqcluster.store.built import BuiltBatch
from tests.store.conftest import SEGMENT, make_config

Written = tuple[int, bytes, list[BuiltBatch]]
"""An entry as every replica writes it: where its bytes go, the bytes, its batches."""


def entry(builder: EntryBuilder, queues: dict[str, int], index: int, topic: str,
          bodies: list[bytes]) -> Written:
    """Entry ``index`` as a leader places it after those before (``queues``: each
    topic's next queue offset so far)."""
    n = len(bodies)
    batch = RawBatch(topic, 0, "10.0.0.9:1", 1, bodies, mark_positions([b""] * n, index, 0),
                     [0] * n, [0] * n)
    enc, problem = check_batch(batch, "10.0.0.1:10911", 4096, 4096, SEGMENT)
    assert enc is not None, problem
    assert builder.place(enc, 1_000 + index, lambda t, _q: queues.get(t, 0), SEGMENT)
    queues[topic] = queues.get(topic, 0) + n
    start, parts, runs = builder.take()
    return start, b"".join(parts), runs


async def replicas(tmp_path: Path, applied: list[list[Written]],
                   uncommitted: list[list[Written]] | None = None) -> DLedgerCluster:
    """A cluster whose replica ``i`` wrote and committed ``applied[i]`` (as its DLedger
    log does), then wrote ``uncommitted[i]`` and was stopped."""
    cluster = DLedgerCluster(Network(), tmp_path)
    for i, entries in enumerate(applied):
        root = tmp_path / f"b{i}"
        store = MessageStore(make_config(root, storePathDLedgerCommitLog=str(root / "dledger")))
        await store.start()
        for start, data, runs in entries:
            assert store.append_replicated(start, data, runs)
            store.confirm_to(start + len(data), True)
        for start, data, runs in (uncommitted or [[]] * len(applied))[i]:
            assert store.append_replicated(start, data, runs)
        await store.shutdown()
        cluster.broker_props.append({"storePathRootDir": str(root)})
    cluster.brokers = cast(list[HostProcess], [None] * len(applied))
    return cluster


def leader() -> tuple[EntryBuilder, dict[str, int]]:
    builder = EntryBuilder()
    builder.start_from(0)
    return builder, {}


_LEADER = leader()
WORKLOAD = [entry(*_LEADER, 1, TOPIC, [b"a", b"b"]), entry(*_LEADER, 2, TOPIC, [b"c"])]
RETRY = entry(*_LEADER, 3, "%RETRY%ChaosGroup", [b"a"])


async def test_a_replica_stopped_before_the_leaders_last_entry_is_a_prefix(
        tmp_path: Path) -> None:
    cluster = await replicas(tmp_path, [WORKLOAD, [*WORKLOAD, RETRY], [*WORKLOAD, RETRY]])
    same, detail = cluster.replicas_identical()
    assert same, detail
    assert "%RETRY%ChaosGroup': 1" in detail


async def test_a_replica_lacking_a_workload_message_is_reported(tmp_path: Path) -> None:
    cluster = await replicas(tmp_path, [WORKLOAD[:1], WORKLOAD, WORKLOAD])
    same, detail = cluster.replicas_identical()
    assert not same
    assert detail.startswith("b0 ends at") and "lacks 1 workload messages" in detail


async def test_replicas_that_differ_below_the_shortest_are_reported(tmp_path: Path) -> None:
    builder, queues = leader()
    other = [entry(builder, queues, 1, TOPIC, [b"a", b"b"]), entry(builder, queues, 2, TOPIC,
                                                                   [b"x"])]
    cluster = await replicas(tmp_path, [WORKLOAD, other, WORKLOAD])
    same, detail = cluster.replicas_identical()
    assert not same
    assert detail.startswith("b1's commitlog differs from the longest at byte")
    assert f"b1: {TOPIC} 2.0" in detail


async def test_an_uncommitted_tail_is_no_difference(tmp_path: Path) -> None:
    """A leader wrote an entry a majority never had (never acknowledged) and stopped: its
    commitlog goes on past the others' committed end with bytes none of them has."""
    builder, queues = leader()
    fresh = [entry(builder, queues, 1, TOPIC, [b"a", b"b"]), entry(builder, queues, 2, TOPIC,
                                                                   [b"c"])]
    cut_off = entry(builder, queues, 3, TOPIC, [b"never acknowledged"])
    cluster = await replicas(tmp_path, [fresh, fresh, fresh], [[cut_off], [], []])
    same, detail = cluster.replicas_identical()
    assert same, detail
    assert detail.startswith("identical")
