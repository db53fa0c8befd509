from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from mqcluster.store import GetStatus, MessageStore
from mqcluster.store.consume_queue import UNIT

from .conftest import StoreFactory, rec

QUIET = {"flushIntervalConsumeQueue": 3_600_000, "cleanResourceInterval": 3_600_000}


def crash_copy(store: MessageStore, dst: Path) -> Path:
    """The store's files as a kill -9 would leave them (the page cache survives)."""
    shutil.copytree(store.config.storePathRootDir, dst)
    return dst


def commitlog_file(root: Path, offset: int, segment: int) -> Path:
    return root / "commitlog" / f"{offset - offset % segment:020d}"


def patch(path: Path, pos: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(data)


async def test_torn_tail_is_cut_and_queues_follow(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    store = store_factory(**QUIET)
    await store.start()
    results = await store.put_messages([rec(i) for i in range(10)])
    await store.wait_dispatched()
    copy = crash_copy(store, tmp_path / "crashed")
    last = results[-1]
    seg = commitlog_file(copy, last.commitlog_offset, 4096)
    half = last.store_size // 2
    patch(seg, last.commitlog_offset % 4096 + half, bytes(last.store_size - half))

    again = store_factory(root=copy, **QUIET)
    await again.start()
    assert again.recovery is not None
    assert again.recovery.truncated_at == last.commitlog_offset
    assert not again.recovery.corrupt
    assert again.commitlog_max_offset == last.commitlog_offset
    assert again.max_offset("T", 0) == 9
    got = again.get_messages("T", 0, 0, 100)
    assert [m.msg_id for m in got.messages] == [f"id-{i}" for i in range(9)]
    redo = await again.put_message(rec(100))
    assert (redo.queue_offset, redo.commitlog_offset) == (9, last.commitlog_offset)


async def test_garbage_after_the_tail_is_cleared(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    store = store_factory(**QUIET)
    await store.start()
    results = await store.put_messages([rec(i) for i in range(3)])
    copy = crash_copy(store, tmp_path / "crashed")
    end = results[-1].next_commitlog_offset
    patch(commitlog_file(copy, end, 4096), end + 50, b"\xff" * 100)
    again = store_factory(root=copy, **QUIET)
    await again.start()
    assert again.commitlog_max_offset == end
    with open(commitlog_file(copy, end, 4096), "rb") as f:
        f.seek(end)
        assert not any(f.read(4096 - end))


async def test_corruption_below_the_flushed_offset_is_reported(
        store_factory: StoreFactory, caplog: pytest.LogCaptureFixture) -> None:
    store = store_factory(**QUIET)
    await store.start()
    results = await store.put_messages([rec(i) for i in range(10)])
    await store.shutdown()
    root = Path(store.config.storePathRootDir)
    bad = results[6]
    patch(commitlog_file(root, bad.commitlog_offset, 4096),
          bad.commitlog_offset % 4096 + bad.store_size - 3, b"\x00")
    with caplog.at_level(logging.ERROR, logger="mqcluster.store"):
        again = store_factory(**QUIET)
        await again.start()
    assert again.recovery is not None and again.recovery.corrupt
    assert again.recovery.truncated_at == bad.commitlog_offset
    assert "CRC mismatch" in again.recovery.reason
    assert any("commitlog damaged" in r.getMessage() and "4 record(s) lost" in r.getMessage()
               for r in caplog.records)
    assert again.recovery.records_lost == 4 and again.recovery.intact_lost == 3
    assert again.max_offset("T", 0) == 6


async def test_flipped_bit_is_never_returned_to_readers(store_factory: StoreFactory) -> None:
    store = store_factory(**QUIET)
    await store.start()
    results = await store.put_messages([rec(i) for i in range(5)])
    await store.wait_dispatched()
    bad = results[2]
    root = Path(store.config.storePathRootDir)
    path = commitlog_file(root, bad.commitlog_offset, 4096)
    with open(path, "r+b") as f:
        f.seek(bad.commitlog_offset + 80)
        byte = f.read(1)[0]
        f.seek(bad.commitlog_offset + 80)
        f.write(bytes([byte ^ 0x01]))
    got = store.get_messages("T", 0, 0, 10)
    assert [m.queue_offset for m in got.messages] == [0, 1]
    assert got.next_offset == 2
    stuck = store.get_messages("T", 0, 2, 10)
    assert stuck.status is GetStatus.OFFSET_FOUND_NULL and not stuck.messages
    assert store.get_message_by_offset(bad.commitlog_offset) is None


async def test_consume_queue_behind_is_redispatched(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    store = store_factory(**QUIET)
    await store.start()
    await store.put_messages([rec(i) for i in range(8)])
    await store.wait_dispatched()
    copy = crash_copy(store, tmp_path / "crashed")
    cq_file = copy / "consumequeue" / "T" / "0" / f"{0:020d}"
    patch(cq_file, 5 * UNIT.size, bytes(5 * UNIT.size))
    again = store_factory(root=copy, **QUIET)
    await again.start()
    assert again.max_offset("T", 0) == 8
    assert len(again.get_messages("T", 0, 0, 100).messages) == 8


async def test_restart_after_clean_shutdown_scans_only_the_tail(
        store_factory: StoreFactory) -> None:
    store = store_factory(**QUIET)
    await store.start()
    await store.put_messages([rec(i, size=900) for i in range(20)])
    await store.shutdown()
    assert not os.path.exists(store.config.abort_path)
    again = store_factory(**QUIET)
    await again.start()
    assert again.recovery is not None and again.recovery.truncated_at is None
    assert again.recovery.scanned_from == again.commitlog_max_offset // 4096 * 4096
    assert again.max_offset("T", 0) == 20


async def test_second_open_of_the_same_store_is_refused(store_factory: StoreFactory) -> None:
    from mqcluster.store.api import StoreLockedError

    store = store_factory(**QUIET)
    await store.start()
    with pytest.raises(StoreLockedError):
        store_factory(**QUIET).open()


async def test_truncate_commitlog_for_replication(store_factory: StoreFactory) -> None:
    store = store_factory(**QUIET)
    await store.start()
    results = await store.put_messages([rec(i, queue_id=i % 2) for i in range(10)])
    await store.wait_dispatched()
    await store.truncate_commitlog(results[6].commitlog_offset)
    assert store.commitlog_max_offset == results[6].commitlog_offset
    assert (store.max_offset("T", 0), store.max_offset("T", 1)) == (3, 3)
    nxt = await store.put_message(rec(50, queue_id=0))
    assert nxt.queue_offset == 3 and nxt.commitlog_offset == results[6].commitlog_offset


async def test_damaged_checkpoint_means_a_full_scan(store_factory: StoreFactory) -> None:
    from mqcluster.store.checkpoint import Checkpoint, load_checkpoint

    store = store_factory(**QUIET)
    await store.start()
    await store.put_messages([rec(i, size=900) for i in range(12)])
    await store.shutdown()
    cp = load_checkpoint(store.config.checkpoint_path)
    assert isinstance(cp, Checkpoint)
    assert cp.physic_offset == cp.logics_offset == store.commitlog_max_offset
    assert cp.physic_msg_timestamp > 0 and cp.logics_msg_timestamp > 0
    patch(Path(store.config.checkpoint_path), 3, b"\xff")
    assert load_checkpoint(store.config.checkpoint_path) is None
    again = store_factory(**QUIET)
    await again.start()
    assert again.recovery is not None and again.recovery.scanned_from == 0
    assert again.recovery.messages_scanned == 12
    assert again.max_offset("T", 0) == 12
