"""Store alone, 1 KiB messages: batched ASYNC_FLUSH puts and 64 concurrent SYNC_FLUSH producers.

The disk's raw sequential-write rate and fsync rate are measured first, in the same
directory, and are the limits the store's rates are compared to; then what writing
costs in system CPU when the page cache grows into fresh pages, against a journal
that drops each fsync'd range (the Raft log, ``raft/disk_log.py``).
"""

from __future__ import annotations

import asyncio
import os
import resource
import shutil
import tempfile
import time
import timeit
import zlib
from collections.abc import Callable
from functools import partial
from pathlib import Path

from bench import Row
from mqcluster.common.crc import crc32
from mqcluster.store import FlushDiskType, MessageRecord, MessageStore, PutStatus, StoreConfig

NAME = "store"
MSG_SIZE = 1024
PHASE_SECONDS = 1.5
BATCH = 32
SYNC_PRODUCERS = 64
SEGMENT = 64 * 1024 * 1024


def raw_sequential_mib_s(directory: Path, total_mib: int = 32) -> float:
    path = directory / "seq-probe"
    chunk = os.urandom(1024 * 1024)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        started = time.perf_counter()
        for _ in range(total_mib):
            os.write(fd, chunk)
        os.fsync(fd)
        return total_mib / (time.perf_counter() - started)
    finally:
        os.close(fd)
        path.unlink()


def raw_fsyncs_per_s(directory: Path, seconds: float = 1.0) -> float:
    path = directory / "fsync-probe"
    block = os.urandom(4096)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        n, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            os.write(fd, block)
            os.fsync(fd)
            n += 1
        return n / (time.perf_counter() - started)
    finally:
        os.close(fd)
        path.unlink()


def _system_seconds() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


def _journal_write(path: Path, total_mib: int, drop: bool) -> float:
    """System CPU us per KiB of writing ``total_mib`` in 64 KiB writes, fsync every
    8 MiB, each fsync'd range dropped from the page cache when ``drop``."""
    chunk = os.urandom(64 * 1024)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        started, synced = _system_seconds(), 0
        for n in range(1, total_mib * 16 + 1):
            os.write(fd, chunk)
            if n % 128 == 0:
                os.fsync(fd)
                if drop:
                    os.posix_fadvise(fd, synced, n * len(chunk) - synced,
                                     os.POSIX_FADV_DONTNEED)
                synced = n * len(chunk)
        return (_system_seconds() - started) / (total_mib * 1024) * 1e6
    finally:
        os.close(fd)


def page_cache_costs(directory: Path, total_mib: int = 512) -> tuple[float, float]:
    """System CPU us per KiB written: the page cache growing (pages the kernel had to
    find, on a VM often memory the host took back), and fsync'd ranges dropped (the
    same pages filled again). Both files stay until both are measured."""
    try:
        grown = _journal_write(directory / "grow-probe", total_mib, drop=False)
        dropped = _journal_write(directory / "drop-probe", total_mib, drop=True)
        return grown, dropped
    finally:
        for name in ("grow-probe", "drop-probe"):
            (directory / name).unlink(missing_ok=True)


def crc_us_per_record(size: int = 1100, number: int = 100_000) -> tuple[float, float]:
    """CPU us per CRC-32 of one 1 KiB message's record: zlib's, and the broker's."""
    data = os.urandom(size)

    def per_call(f: Callable[[bytes], int]) -> float:
        return min(timeit.repeat(partial(f, data), number=number, repeat=3)) / number * 1e6

    return per_call(zlib.crc32), per_call(crc32)


def _record(i: int) -> MessageRecord:
    return MessageRecord("BenchTopic", i % 8, b"m" * MSG_SIZE, tags="bench", keys=[str(i)],
                         born_timestamp=i)


async def _async_batched(root: Path) -> tuple[float, int]:
    store = MessageStore(StoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=SEGMENT,
                                     flushDiskType=FlushDiskType.ASYNC_FLUSH))
    await store.start()
    n, started = 0, time.perf_counter()
    try:
        while time.perf_counter() - started < PHASE_SECONDS:
            results = await store.put_messages([_record(n + j) for j in range(BATCH)])
            n += sum(r.status is PutStatus.PUT_OK for r in results)
        elapsed = time.perf_counter() - started
        size = results[-1].store_size
    finally:
        await store.shutdown()
    return n / elapsed, size


async def _sync_concurrent(root: Path) -> tuple[float, float]:
    fsyncs = 0

    def counting_fsync(fd: int) -> None:
        nonlocal fsyncs
        fsyncs += 1
        os.fsync(fd)

    store = MessageStore(StoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=SEGMENT,
                                     flushDiskType=FlushDiskType.SYNC_FLUSH,
                                     flushIntervalConsumeQueue=3_600_000),
                         fsync=counting_fsync)
    await store.start()
    count = 0
    deadline = time.perf_counter() + PHASE_SECONDS

    async def producer(worker: int) -> None:
        nonlocal count
        i = worker
        while time.perf_counter() < deadline:
            if (await store.put_message(_record(i))).status is PutStatus.PUT_OK:
                count += 1
            i += SYNC_PRODUCERS

    fsyncs_before = fsyncs
    started = time.perf_counter()
    try:
        await asyncio.gather(*(producer(w) for w in range(SYNC_PRODUCERS)))
        elapsed = time.perf_counter() - started
        used = fsyncs - fsyncs_before
    finally:
        await store.shutdown()
    return count / elapsed, count / max(1, used)


def run() -> list[Row]:
    root = Path(tempfile.mkdtemp(prefix="store-bench-"))
    try:
        seq = raw_sequential_mib_s(root)
        fsync_rate = raw_fsyncs_per_s(root)
        grown, dropped = page_cache_costs(root)
        zlib_us, crc_us = crc_us_per_record()
        async_rate, record_size = asyncio.run(_async_batched(root / "async"))
        sync_rate, per_fsync = asyncio.run(_sync_concurrent(root / "sync"))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    bandwidth_msgs = seq * 1024 * 1024 / record_size
    return [
        Row(NAME, "raw sequential write", seq, "MiB/s", note="32 MiB + fsync"),
        Row(NAME, "raw fsync", fsync_rate, "fsync/s", note="4 KiB append + fsync"),
        Row(NAME, f"put ASYNC_FLUSH batch={BATCH}", async_rate, "msg/s",
            limit=bandwidth_msgs, note=f"1 KiB body, limit = raw MiB/s / {record_size} B"),
        Row(NAME, f"put SYNC_FLUSH {SYNC_PRODUCERS} producers", sync_rate, "msg/s",
            limit=min(bandwidth_msgs, fsync_rate * SYNC_PRODUCERS),
            note="limit = min(bandwidth, fsync/s x producers)"),
        Row(NAME, "SYNC_FLUSH messages per fsync", per_fsync, "msg",
            limit=float(SYNC_PRODUCERS), note="group commit"),
        Row(NAME, "CRC-32 of a 1 KiB record, zlib", zlib_us, "us"),
        Row(NAME, "CRC-32 of a 1 KiB record, the store's (isal)", crc_us, "us", limit=zlib_us,
            note="the same values; ratio: this over zlib's"),
        Row(NAME, "write into a growing page cache", grown, "sys us/KiB",
            note="512 MiB in 64 KiB writes, fsync every 8 MiB, pages left cached"),
        Row(NAME, "write dropping fsync'd pages (Raft log)", dropped, "sys us/KiB",
            limit=grown, note="same, each fsync'd range dropped: its pages are filled again; "
                              "ratio: this cost over the growing cache's"),
    ]
