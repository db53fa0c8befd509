"""Recovery never destroys intact data: what it cuts off is counted and kept aside."""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path

import pytest

from mqcluster.store import codec
from mqcluster.store.codec import RecordKind

from .conftest import StoreFactory, rec

SEGMENT = 64 * 1024
QUIET = {"flushIntervalConsumeQueue": 3_600_000, "cleanResourceInterval": 3_600_000,
         "mappedFileSizeCommitLog": SEGMENT}


def segment_of(root: Path, offset: int) -> Path:
    return root / "commitlog" / f"{offset - offset % SEGMENT:020d}"


def scramble(path: Path, pos: int, length: int, seed: int) -> None:
    """Random bytes over ``length`` bytes at ``pos``: a damaged disk block."""
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(random.Random(seed).randbytes(length))


def messages_in(data: bytes, base: int) -> list[str]:
    """Keys of the intact records in ``data`` (commitlog bytes from offset ``base``),
    stepping over damage the way an operator would: record by record from each one found."""
    keys, i = [], 0
    while i < len(data):
        c = codec.check(data, i, base + i, True, SEGMENT)
        if c.kind is RecordKind.MESSAGE:
            keys.append(codec.decode(data, i).keys[0])
            i += c.size
        else:
            i += 1
    return keys


async def test_damage_inside_record_250_keeps_the_49_after_it(
        store_factory: StoreFactory, caplog: pytest.LogCaptureFixture) -> None:
    store = store_factory(**QUIET)
    await store.start()
    results = await store.put_messages([rec(i, size=60) for i in range(300)])
    await store.shutdown()  # everything fsynced and checkpointed
    root = Path(store.config.storePathRootDir)
    bad, last = results[250], results[-1]
    assert segment_of(root, bad.commitlog_offset) == segment_of(root, last.commitlog_offset)
    path = segment_of(root, bad.commitlog_offset)
    tail = path.read_bytes()[bad.commitlog_offset % SEGMENT:last.next_commitlog_offset % SEGMENT]
    scramble(path, bad.commitlog_offset % SEGMENT + 40, 30, seed=250)

    with caplog.at_level(logging.ERROR, logger="mqcluster.store"):
        again = store_factory(**QUIET)
        await again.start()
    report = again.recovery
    assert report is not None
    assert report.truncated_at == bad.commitlog_offset and report.corrupt
    assert (report.records_lost, report.intact_lost, report.records_lost_exact) == (50, 49, True)
    assert report.damaged == [(bad.commitlog_offset, results[251].commitlog_offset)]
    assert report.set_aside_bytes == last.next_commitlog_offset - bad.commitlog_offset
    # The bytes cut off are kept, named by their offset: the 49 intact records are there.
    (kept,) = report.set_aside
    assert Path(kept).parent == root / "commitlog.damaged"
    assert os.path.basename(kept).startswith(f"{bad.commitlog_offset:020d}-")
    data = Path(kept).read_bytes()
    assert len(data) == len(tail) and data[-100:] == tail[-100:]
    assert messages_in(data, bad.commitlog_offset) == [f"k{i}" for i in range(251, 300)]
    # One error line says how many records were lost and where they went.
    lines = [r.getMessage() for r in caplog.records if "commitlog damaged" in r.getMessage()]
    assert len(lines) == 1
    assert "50 record(s) lost" in lines[0] and "49 intact" in lines[0] and kept in lines[0]
    assert again.max_offset("T", 0) == 250


async def test_damage_in_an_earlier_segment_keeps_every_later_segment(
        store_factory: StoreFactory) -> None:
    store = store_factory(**QUIET)
    await store.start()
    results = await store.put_messages([rec(i, size=2000) for i in range(80)])
    await store.shutdown()
    root = Path(store.config.storePathRootDir)
    bad = results[10]
    later = [r for r in results if r.commitlog_offset >= SEGMENT]
    assert later and segment_of(root, bad.commitlog_offset).name == f"{0:020d}"
    scramble(segment_of(root, bad.commitlog_offset), bad.commitlog_offset + 100, 8, seed=10)
    (root / "checkpoint").unlink()  # (a restart scans from the checkpoint's segment only)

    again = store_factory(**QUIET)
    await again.start()
    report = again.recovery
    assert report is not None and report.truncated_at == bad.commitlog_offset
    assert (report.records_lost, report.intact_lost) == (70, 69)
    assert len(report.set_aside) == 1 + (results[-1].commitlog_offset // SEGMENT)
    keys = []
    for kept in report.set_aside:
        start = int(os.path.basename(kept).split("-")[0])
        keys += messages_in(Path(kept).read_bytes(), start)
    assert keys == [f"k{i}" for i in range(11, 80)]
    assert again.commitlog_max_offset == bad.commitlog_offset
    assert not segment_of(root, SEGMENT).exists()


async def test_a_damaged_length_field_counts_at_least_one_record(
        store_factory: StoreFactory) -> None:
    store = store_factory(**QUIET)
    await store.start()
    results = await store.put_messages([rec(i, size=60) for i in range(20)])
    await store.shutdown()
    root = Path(store.config.storePathRootDir)
    # Garbage from record 5's header through record 7: three records unreadable.
    start = results[5].commitlog_offset
    scramble(segment_of(root, start), start, results[8].commitlog_offset - start - 4, seed=5)
    again = store_factory(**QUIET)
    await again.start()
    report = again.recovery
    assert report is not None
    assert report.intact_lost == 12 and not report.records_lost_exact
    assert report.records_lost == 13  # (at least: one per unreadable region)


async def test_a_torn_tail_is_kept_and_not_called_damage(
        store_factory: StoreFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import shutil

    store = store_factory(**QUIET)
    await store.start()
    results = await store.put_messages([rec(i) for i in range(10)])
    copy = tmp_path / "crashed"
    shutil.copytree(store.config.storePathRootDir, copy)
    last = results[-1]
    path = segment_of(copy, last.commitlog_offset)
    with open(path, "r+b") as f:  # the last write reached the disk only in part
        f.seek(last.commitlog_offset + 50)
        f.write(bytes(last.store_size - 50))
    with caplog.at_level(logging.WARNING, logger="mqcluster.store"):
        again = store_factory(root=copy, **QUIET)
        await again.start()
    report = again.recovery
    assert report is not None and not report.corrupt
    assert (report.records_lost, report.intact_lost) == (1, 0)
    assert 0 < report.set_aside_bytes <= 50  # (what was written, less trailing zeros)
    assert any("torn tail" in r.getMessage() and r.levelno == logging.WARNING
               for r in caplog.records)


async def test_a_clean_restart_sets_nothing_aside(store_factory: StoreFactory) -> None:
    store = store_factory(**QUIET)
    await store.start()
    await store.put_messages([rec(i) for i in range(10)])
    await store.shutdown()
    again = store_factory(**QUIET)
    await again.start()
    assert again.recovery is not None and again.recovery.set_aside == []
    assert not os.path.exists(again.config.damaged_dir)


async def test_records_ending_in_zero_bytes_are_counted_whole(
        store_factory: StoreFactory) -> None:
    from mqcluster.store import MessageRecord

    store = store_factory(**QUIET)
    await store.start()
    # No properties: every record ends with a zero length field; the last body is zeros.
    results = await store.put_messages([MessageRecord("T", 0, bytes([i]) * 50)
                                        for i in range(10, 0, -1)] +
                                       [MessageRecord("T", 0, bytes(50))])
    await store.shutdown()
    root = Path(store.config.storePathRootDir)
    bad = results[3]
    scramble(segment_of(root, bad.commitlog_offset), bad.commitlog_offset + 20, 8, seed=3)
    again = store_factory(**QUIET)
    await again.start()
    report = again.recovery
    assert report is not None
    assert (report.records_lost, report.intact_lost, report.records_lost_exact) == (8, 7, True)
    assert report.set_aside_bytes == results[-1].next_commitlog_offset - bad.commitlog_offset


async def test_a_zeroed_block_does_not_hide_the_records_after_it(
        store_factory: StoreFactory, caplog: pytest.LogCaptureFixture) -> None:
    store = store_factory(**QUIET)
    await store.start()
    results = await store.put_messages([rec(i, size=60) for i in range(300)])
    await store.shutdown()
    root = Path(store.config.storePathRootDir)
    bad = results[250]
    with open(segment_of(root, bad.commitlog_offset), "r+b") as f:  # a lost write: zeros
        f.seek(bad.commitlog_offset % SEGMENT)
        f.write(bytes(bad.store_size))
    with caplog.at_level(logging.ERROR, logger="mqcluster.store"):
        again = store_factory(**QUIET)
        await again.start()
    report = again.recovery
    assert report is not None and report.truncated_at == bad.commitlog_offset
    assert report.intact_lost == 49 and report.records_lost == 50
    assert not report.records_lost_exact  # (a zeroed region has no length field)
    assert report.damaged == [(bad.commitlog_offset, results[251].commitlog_offset)]
    (kept,) = report.set_aside
    assert messages_in(Path(kept).read_bytes(), bad.commitlog_offset) == [
        f"k{i}" for i in range(251, 300)]
    assert any("at least 50 record(s) lost" in r.getMessage() for r in caplog.records)


async def test_a_zeroed_last_record_counts_as_lost(store_factory: StoreFactory) -> None:
    store = store_factory(**QUIET)
    await store.start()
    results = await store.put_messages([rec(i) for i in range(10)])
    await store.shutdown()
    last = results[-1]
    with open(segment_of(Path(store.config.storePathRootDir), last.commitlog_offset),
              "r+b") as f:
        f.seek(last.commitlog_offset)
        f.write(bytes(last.store_size))
    again = store_factory(**QUIET)
    await again.start()
    report = again.recovery
    assert report is not None and report.corrupt and report.set_aside == []
    assert (report.records_lost, report.records_lost_exact) == (1, False)
    assert report.damaged == [(last.commitlog_offset, last.next_commitlog_offset)]
