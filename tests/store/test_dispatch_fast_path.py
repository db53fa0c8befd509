"""The dispatcher takes local appends from the commitlog's record of them; it must build
exactly the consume queues a scan of the commitlog builds."""

from __future__ import annotations

import asyncio
import bisect
import random
from pathlib import Path

import pytest

from mqcluster.store import MessageRecord, MessageStore, commitlog
from mqcluster.store.consume_queue import CqEntry

from .conftest import SEGMENT, StoreFactory, rec

TRANSACTION_PREPARED = 0x1 << 2


def _batches() -> list[list[MessageRecord]]:
    """Mixed topics, queues, sizes, tags (field or property) and prepared transactions."""
    out, n = [], 0
    for round_ in range(12):
        batch = []
        for j in range(1 + round_ % 4):
            r = rec(n, topic=f"T{j % 2}", queue_id=round_ % 3, size=90 + 37 * j,
                    tags="TagA" if n % 3 else None)
            if n % 7 == 0:
                r.properties["TAGS"] = "FromProps"
            if n % 11 == 5:
                r.sys_flag = TRANSACTION_PREPARED
            batch.append(r)
            n += 1
        out.append(batch)
    return out


def _entries(store: MessageStore) -> dict[tuple[str, int], list[CqEntry]]:
    return {
        key: cq.entries(cq.min_offset, 1 << 20)
        for key, cq in sorted(store._queues.queues.items())
    }


async def _load(store: MessageStore) -> None:
    await store.start()
    for batch in _batches():
        await store.put_messages(batch)
    await store.wait_dispatched()


async def test_appended_batches_build_the_same_queues_as_a_scan(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    fast = store_factory(tmp_path / "fast", flushDiskType="ASYNC_FLUSH")
    scans: list[int] = []
    scan = fast._dispatcher._scan
    fast._dispatcher._scan = lambda *a: scans.append(1) or scan(*a)  # type: ignore[method-assign]
    scanned = store_factory(tmp_path / "scan", flushDiskType="ASYNC_FLUSH")
    scanned._commitlog._remember = lambda batch: None  # type: ignore[method-assign]
    await _load(fast)
    await _load(scanned)
    assert fast._commitlog.files.segments[-1].start > 0  # the load rolled a segment
    assert not scans
    assert _entries(fast) == _entries(scanned)
    assert fast.dispatched_offset == scanned.dispatched_offset == fast.commitlog_max_offset


async def test_gaps_in_the_history_are_scanned(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    reference = store_factory(tmp_path / "ref", flushDiskType="ASYNC_FLUSH")
    await _load(reference)
    store = store_factory(tmp_path / "gaps", flushDiskType="ASYNC_FLUSH")
    await store.start()
    store.set_confirm_offset(0)
    for i, batch in enumerate(_batches()):
        await store.put_messages(batch)
        if i % 3 == 1:
            store._commitlog.recent.pop()  # a gap in the remembered appends
    assert store.dispatched_offset == 0
    store.set_confirm_offset(None)
    await store.wait_dispatched()
    assert _entries(store) == _entries(reference)


async def test_sync_flush_dispatches_while_waiting_for_fsync(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    reference = store_factory(tmp_path / "ref", flushDiskType="ASYNC_FLUSH")
    await _load(reference)
    store = store_factory(tmp_path / "sync", flushDiskType="SYNC_FLUSH")
    await _load(store)
    assert _entries(store) == _entries(reference)
    assert store.flush_rounds >= 1


async def test_remembered_appends_are_bounded(
        store_factory: StoreFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commitlog, "RECENT_ENTRIES", 5)
    reference = store_factory(tmp_path / "ref", flushDiskType="ASYNC_FLUSH")
    await _load(reference)
    store = store_factory(tmp_path / "lagging", flushDiskType="ASYNC_FLUSH")
    await store.start()
    store.set_confirm_offset(0)
    for batch in _batches():
        await store.put_messages(batch)
        assert sum(len(b.entries) for b in store._commitlog.recent) <= 5 + len(batch)
    store.set_confirm_offset(None)
    await store.wait_dispatched()
    assert _entries(store) == _entries(reference)


async def test_a_replica_copying_in_random_chunks_builds_the_same_queues(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    """Replicated bytes are dispatched by walking them: records cut by a chunk end or by
    the confirm offset wait for the rest, blanks and prepared transactions are stepped
    over, and the queues come out as the master's."""
    master = store_factory(tmp_path / "master", flushDiskType="ASYNC_FLUSH")
    await _load(master)
    replica = store_factory(tmp_path / "replica", flushDiskType="ASYNC_FLUSH")
    await replica.start()
    replica.set_confirm_offset(0)
    rng = random.Random(3)
    end = master.commitlog_max_offset
    # Where records of the queues end, and segments start: what dispatch can reach.
    bounds = sorted({e.commitlog_offset + e.size for es in _entries(master).values()
                     for e in es} | set(range(0, end, SEGMENT)))
    while replica.commitlog_max_offset < end:
        offset = replica.commitlog_max_offset
        chunk = master.read_commitlog(offset, rng.randint(1, 900))
        assert await replica.append_commitlog(offset, chunk)
        confirm = rng.randint(replica.confirm_offset or 0, replica.commitlog_max_offset)
        replica.set_confirm_offset(confirm)
        await replica.wait_dispatched(bounds[bisect.bisect_right(bounds, confirm) - 1])
        assert all(cq.max_physical_end <= confirm for cq in replica._queues.queues.values())
    replica.set_confirm_offset(end)
    await replica.wait_dispatched(end)
    assert _entries(replica) == _entries(master)


async def test_dispatch_stops_at_a_damaged_record(store_factory: StoreFactory,
                                                  tmp_path: Path) -> None:
    master = store_factory(tmp_path / "master", flushDiskType="ASYNC_FLUSH")
    await master.start()
    results = await master.put_messages([rec(i, size=200) for i in range(6)])
    replica = store_factory(tmp_path / "replica", flushDiskType="ASYNC_FLUSH")
    await replica.start()
    replica.set_confirm_offset(0)
    data = bytearray(master.read_commitlog(0, master.commitlog_max_offset))
    damaged = results[3].commitlog_offset
    data[damaged + 4:damaged + 8] = b"\0\0\0\1"  # the magic code of record 3
    assert await replica.append_commitlog(0, bytes(data))
    replica.set_confirm_offset(len(data))
    await replica.wait_dispatched(damaged)
    await asyncio.sleep(0.05)
    assert replica.dispatched_offset == damaged
    assert replica.max_offset("T", 0) == 3
    assert "bad magic code" in replica._dispatcher.stuck_reason
