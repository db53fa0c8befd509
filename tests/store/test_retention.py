from __future__ import annotations

import os
import time

from mqcluster.store import GetStatus, MessageStore, PutStatus

from .conftest import FakeClock, StoreFactory, rec


def local(hour: int, day: int = 10) -> float:
    return time.mktime((2026, 1, day, hour, 30, 0, 0, 0, -1))


def segments(store: MessageStore) -> list[str]:
    return sorted(os.listdir(store.config.commitlog_dir))


async def _fill(store_factory: StoreFactory, **kw: object) -> MessageStore:
    store = store_factory(fileReservedTime=1, cleanResourceInterval=3_600_000, **kw)
    await store.start()
    await store.put_messages([rec(i, size=900) for i in range(24)])
    await store.flush()
    return store


async def test_expired_segments_go_in_the_delete_window(
        store_factory: StoreFactory, clock: FakeClock) -> None:
    clock.now = local(10)
    store = await _fill(store_factory)
    total = len(segments(store))
    assert total >= 6
    clock.now = local(12)
    assert store.clean_expired_files().deleted_segments == 0
    clock.now = local(4, day=11)
    result = store.clean_expired_files()
    assert result.deleted_segments == total - 1
    assert len(segments(store)) == 1
    min_offset = store.min_offset("T", 0)
    assert min_offset > 0
    cq_files = os.listdir(os.path.join(store.config.consumequeue_dir, "T", "0"))
    assert len(cq_files) == 1
    got = store.get_messages("T", 0, 0)
    assert (got.status, got.next_offset) == (GetStatus.OFFSET_TOO_SMALL, min_offset)
    rest = store.get_messages("T", 0, min_offset, 100)
    assert rest.messages[-1].queue_offset == 23


async def test_fresh_segments_stay_in_the_delete_window(
        store_factory: StoreFactory, clock: FakeClock) -> None:
    clock.now = local(4)
    store = await _fill(store_factory)
    total = len(segments(store))
    clock.advance(1800)
    assert store.clean_expired_files().deleted_segments == 0
    assert len(segments(store)) == total


async def test_disk_watermark_deletes_expired_outside_the_window(
        store_factory: StoreFactory, clock: FakeClock) -> None:
    clock.now = local(10)
    store = await _fill(store_factory, disk_usage=lambda _path: 0.80)
    total = len(segments(store))
    assert store.clean_expired_files().deleted_segments == 0
    clock.now = local(13)
    assert store.clean_expired_files().deleted_segments == total - 1


async def test_forcible_cleaning_deletes_until_usage_drops(
        store_factory: StoreFactory, clock: FakeClock) -> None:
    clock.now = local(10)
    holder: list[MessageStore] = []

    def usage(_path: str) -> float:
        return 0.5 + 0.1 * len(segments(holder[0])) if holder else 0.1

    store = await _fill(store_factory, disk_usage=usage)
    holder.append(store)
    assert len(segments(store)) >= 6
    result = store.clean_expired_files()
    assert len(segments(store)) == 3
    assert result.disk_usage <= 0.85 and not result.disk_full


async def test_full_disk_refuses_writes_and_keeps_the_last_segment(
        store_factory: StoreFactory, clock: FakeClock) -> None:
    clock.now = local(10)
    store = await _fill(store_factory, disk_usage=lambda _path: 0.95)
    result = store.clean_expired_files()
    assert result.disk_full and len(segments(store)) == 1
    refused = await store.put_message(rec(99))
    assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE


async def test_undispatched_or_unflushed_segments_are_kept(
        store_factory: StoreFactory, clock: FakeClock) -> None:
    clock.now = local(10)
    store = store_factory(fileReservedTime=1, flushDiskType="ASYNC_FLUSH",
                          flushIntervalCommitLog=3_600_000, cleanResourceInterval=3_600_000)
    await store.start()
    await store.put_messages([rec(i, size=900) for i in range(24)])
    clock.now = local(4, day=11)
    assert store.clean_expired_files().deleted_segments == 0
    await store.flush()
    assert store.clean_expired_files().deleted_segments > 0
