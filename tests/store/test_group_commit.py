from __future__ import annotations

import asyncio
import os
import threading

from mqcluster.store import PutStatus

from .conftest import StoreFactory, rec


class GatedFsync:
    """Counts fsyncs; the first one blocks until ``release`` is set."""

    def __init__(self) -> None:
        self.calls = 0
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, fd: int) -> None:
        self.calls += 1
        if self.calls == 1:
            self.entered.set()
            self.release.wait(timeout=30)
        os.fsync(fd)


async def test_concurrent_sync_puts_share_fsyncs(store_factory: StoreFactory) -> None:
    gate = GatedFsync()
    gate.release.set()
    store = store_factory(fsync=gate, mappedFileSizeCommitLog=1 << 20,
                          flushIntervalConsumeQueue=3_600_000)
    await store.start()
    before = gate.calls
    n = 64
    results = await asyncio.gather(*(store.put_message(rec(i)) for i in range(n)))
    assert all(r.status is PutStatus.PUT_OK for r in results)
    assert gate.calls - before <= n // 8


async def test_producers_arriving_during_an_fsync_share_the_next_one(
        store_factory: StoreFactory) -> None:
    gate = GatedFsync()
    store = store_factory(fsync=gate, mappedFileSizeCommitLog=1 << 20,
                          flushIntervalConsumeQueue=3_600_000)
    await store.start()
    gate.calls = 0
    first = asyncio.ensure_future(store.put_message(rec(0)))
    await asyncio.to_thread(gate.entered.wait, 30)
    rest = [asyncio.ensure_future(store.put_message(rec(i))) for i in range(1, 51)]
    assert store._flusher is not None
    while len(store._flusher._waiters) < 51:
        await asyncio.sleep(0)
    assert not first.done() and not any(t.done() for t in rest)
    gate.release.set()
    results = await asyncio.gather(first, *rest)
    assert all(r.status is PutStatus.PUT_OK for r in results)
    assert gate.calls == 2
    assert store.flushed_offset == store.commitlog_max_offset


async def test_sync_flush_timeout_is_reported(store_factory: StoreFactory) -> None:
    gate = GatedFsync()
    store = store_factory(fsync=gate, syncFlushTimeout=50, flushIntervalConsumeQueue=3_600_000)
    await store.start()
    gate.calls = 0
    try:
        result = await store.put_message(rec(0))
        assert result.status is PutStatus.FLUSH_DISK_TIMEOUT
        assert result.status.stored and result.queue_offset == 0
    finally:
        gate.release.set()


async def test_async_flush_acks_before_fsync(store_factory: StoreFactory) -> None:
    gate = GatedFsync()
    store = store_factory(fsync=gate, flushDiskType="ASYNC_FLUSH",
                          flushIntervalConsumeQueue=3_600_000)
    await store.start()
    gate.calls = 0
    try:
        results = await store.put_messages([rec(i) for i in range(10)])
        assert all(r.status is PutStatus.PUT_OK for r in results)
    finally:
        gate.release.set()
    await store.flush()
    assert store.flushed_offset == store.commitlog_max_offset
