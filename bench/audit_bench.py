"""Audit pipeline: scanning a commitlog on Spark against the store's own reader.

A commitlog of ``AUDIT_BENCH_MB`` MiB (default 2048) of 1 KiB messages in 64 MiB
segments is written in bulk (records encoded once, then re-stamped with their offset
and CRC). Measured in the same run: the store's single-process reader
(``store.offline.iter_messages``, the baseline and the row's ``limit``); the
``mqcluster.commitlog`` data source counted by Spark on ``local[2]``; the same bulk
decoder in one process without Spark; and Spark's fixed cost (an empty job). The scan is
timed twice: the first also starts Spark's Python workers, the second is the steady state.
"""

from __future__ import annotations

import os
import struct
import tempfile
import time
import zlib
from pathlib import Path

from bench import Row
from mqcluster.store import codec
from mqcluster.store.message import MessageRecord

NAME = "audit"
SEGMENT = 64 * 1024 * 1024
BODY = 1024
_PHYS = struct.Struct(">q")
_CRC = struct.Struct(">I")


def write_commitlog(directory: Path, total_bytes: int) -> int:
    """Segments of valid records up to ``total_bytes``; returns the record count."""
    directory.mkdir(parents=True)
    host = "127.0.0.1:10911"
    parts = codec.prepare(MessageRecord("BenchAudit", 0, b"x" * BODY, keys=["k"],
                                        born_host=host), host)
    one = bytearray(codec.encode(parts, 0, 0, int(time.time() * 1000)))
    size = len(one)
    per_segment = (SEGMENT - codec.END_FILE_MIN_BLANK_LENGTH) // size
    count = 0
    for base in range(0, total_bytes, SEGMENT):
        buf = bytearray(one * per_segment)
        for i in range(per_segment):
            at = i * size
            _PHYS.pack_into(buf, at + 28, base + at)
            struct.pack_into(">q", buf, at + 20, count + i)  # queue offset
            _CRC.pack_into(buf, at + 8, zlib.crc32(memoryview(buf)[at + 12:at + size]))
        used = per_segment * size
        buf += codec.encode_blank(SEGMENT - used) + bytes(SEGMENT - used - 8)
        (directory / f"{base:020d}").write_bytes(buf)
        count += per_segment
    return count


def run() -> list[Row]:
    from mqcluster.store.offline import iter_messages
    from mqcluster_audit.segments import read_segment, segment_files
    from mqcluster_audit.sources import session

    mib = int(os.environ.get("AUDIT_BENCH_MB", "2048"))
    with tempfile.TemporaryDirectory(prefix="bench-audit-") as tmp:
        store = Path(tmp) / "store"
        records = write_commitlog(store / "commitlog", mib * 1024 * 1024)
        total = sum(f.stat().st_size for f in (store / "commitlog").iterdir())
        mb = total / 1e6

        t0 = time.perf_counter()
        single = sum(1 for _ in iter_messages(str(store / "commitlog")))
        single_s = time.perf_counter() - t0

        t0 = time.perf_counter()
        bulk = sum(read_segment(f, "r").num_rows for f in segment_files(store / "commitlog"))
        bulk_s = time.perf_counter() - t0

        spark = session("local[2]", "bench-audit")
        spark.sparkContext.setLogLevel("ERROR")
        try:
            spark.range(1).count()  # warm up the JVM and the Python workers
            t0 = time.perf_counter()
            spark.range(1).count()
            empty_s = time.perf_counter() - t0
            df = spark.read.format("mqcluster.commitlog").option("stores", f"r={store}").load()
            # The first scan also starts Spark's Python workers (and their imports); the
            # second is the steady state a long audit runs at.
            t0 = time.perf_counter()
            scanned = df.where("status = 'ok'").count()
            cold_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            scanned = df.where("status = 'ok'").count()
            spark_s = time.perf_counter() - t0
        finally:
            spark.stop()
    assert single == bulk == scanned == records, (single, bulk, scanned, records)
    base = records / single_s
    return [
        Row(NAME, "store's single-process reader", base, "records/s",
            note=f"{mb / single_s:,.0f} MB/s over {mb:,.0f} MB, {records:,} records"),
        Row(NAME, "Spark scan, mqcluster.commitlog, local[2]", records / spark_s, "records/s",
            ">= 3 x single-process reader", base,
            note=f"{mb / spark_s:,.0f} MB/s; {total // SEGMENT} segment partitions; first scan "
                 f"(starting the Python workers) {records / cold_s:,.0f} records/s"),
        Row(NAME, "bulk decoder, one process, no Spark", records / bulk_s, "records/s", "",
            base, note=f"{mb / bulk_s:,.0f} MB/s"),
        Row(NAME, "Spark empty job (fixed cost)", empty_s, "s"),
    ]
