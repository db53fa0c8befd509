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
from mqcluster.broker.dledger import DLedgerStateMachine
from mqcluster.ha.dledger_entry import encode_raw_batch
from mqcluster.raft.types import Entry, EntryType
from mqcluster.store import MessageStore
from mqcluster.store.batch import RawBatch
from tests.store.conftest import make_config


def entry(index: int, topic: str, bodies: list[bytes]) -> Entry:
    n = len(bodies)
    batch = RawBatch(topic, 0, "10.0.0.9:1", 1, bodies, [b""] * n, [0] * n, [0] * n)
    return Entry(index=index, term=1, type=EntryType.NORMAL,
                 data=encode_raw_batch(batch, 1_000 + index, "10.0.0.1:10911"))


async def replicas(tmp_path: Path, applied: list[list[Entry]]) -> DLedgerCluster:
    """A cluster whose replica ``i`` applied ``applied[i]`` and was stopped."""
    cluster = DLedgerCluster(Network(), tmp_path)
    for i, entries in enumerate(applied):
        root = tmp_path / f"b{i}"
        store = MessageStore(make_config(root))
        await store.start()
        sm = DLedgerStateMachine(store, None)
        for e in entries:
            sm.apply(e)
        await store.shutdown()
        cluster.broker_props.append({"storePathRootDir": str(root)})
    cluster.brokers = cast(list[HostProcess], [None] * len(applied))
    return cluster


WORKLOAD = [entry(1, TOPIC, [b"a", b"b"]), entry(2, TOPIC, [b"c"])]
RETRY = entry(3, "%RETRY%ChaosGroup", [b"a"])


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
    other = [WORKLOAD[0], entry(2, TOPIC, [b"x"])]
    cluster = await replicas(tmp_path, [WORKLOAD, other, WORKLOAD])
    same, detail = cluster.replicas_identical()
    assert not same
    assert detail.startswith("b1's commitlog differs from the longest at byte")
    assert f"b1: {TOPIC} 2.0" in detail
