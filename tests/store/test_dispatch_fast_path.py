"""The dispatcher takes local appends from the commitlog's record of them; it must build
exactly the consume queues a scan of the commitlog builds."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqcluster.store import MessageRecord, MessageStore, commitlog
from mqcluster.store.consume_queue import CqEntry

from .conftest import StoreFactory, rec

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
