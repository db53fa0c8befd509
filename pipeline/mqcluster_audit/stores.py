"""The other files of a store, and the test histories, as plain rows (no Spark)."""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mqcluster.ha.dledger_entry import EntryFormatError, decode_batch
from mqcluster.raft.diskformat import RECORD
from mqcluster.raft.types import EntryType
from mqcluster.store.checkpoint import load_checkpoint
from mqcluster.store.codec import MESSAGE_MAGIC, PREFIX
from mqcluster.store.epoch_file import EpochFileCache
from mqcluster.store.offline import iter_consume_queue
from mqcluster_audit.segments import read_segment, segment_files


def parse_stores(spec: str) -> list[tuple[str, Path]]:
    """``"a=/s/a,b=/s/b"`` or ``"/s/a,/s/b"`` -> [(replica, store dir)] (names default to the
    directory's name)."""
    out = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        name, sep, path = part.partition("=")
        if not sep:
            name, path = Path(part).name, part
        out.append((name, Path(path)))
    if not out:
        raise ValueError("no store directory given")
    return out


def commitlog_dir(store: Path) -> Path:
    return store / "commitlog"


def epoch_rows(replica: str, store: Path) -> list[dict[str, Any]]:
    path = store / "epochFileCheckpoint"
    if not path.exists():
        return []
    cache = EpochFileCache.load(str(path))
    max_offset = max_commitlog_offset(store)
    entries = cache.entries
    return [{"replica": replica, "epoch": e.epoch, "start_offset": e.start_offset,
             "end_offset": e.end_offset if i + 1 < len(entries) else max_offset}
            for i, e in enumerate(entries)]


def max_commitlog_offset(store: Path) -> int:
    """End of the last whole, sound record of the commitlog."""
    directory = commitlog_dir(store)
    if not directory.is_dir():
        return 0
    files = segment_files(directory)
    if not files:
        return 0
    last = read_segment(files[-1], "", verify_crc=False)
    good = [r for r in last.to_pylist() if r["status"] == "ok"]
    if not good:
        return int(files[-1].name)
    return int(good[-1]["physical_offset"] + good[-1]["size"])


def confirm_offset(store: Path) -> int | None:
    cp = load_checkpoint(str(store / "checkpoint"))
    return cp.confirm_phy_offset if cp is not None and cp.confirm_phy_offset else None


def consume_queue_rows(replica: str, store: Path) -> Iterator[dict[str, Any]]:
    root = store / "consumequeue"
    if not root.is_dir():
        return
    for topic in sorted(os.listdir(root)):
        if not (root / topic).is_dir():
            continue  # the queue index beside the topic directories
        for qid in sorted((q for q in os.listdir(root / topic) if q.isdigit()), key=int):
            for e in iter_consume_queue(str(root / topic / qid)):
                yield {"replica": replica, "topic": topic, "queue_id": int(qid),
                       "queue_offset": e.queue_offset, "physical_offset": e.commitlog_offset,
                       "size": e.size}


def offset_rows(replica: str, store: Path) -> list[dict[str, Any]]:
    path = store / "config" / "consumerOffset.json"
    if not path.exists():
        return []
    table = json.loads(path.read_text()).get("offsetTable") or {}
    rows = []
    for key, queues in table.items():
        topic, _, group = key.partition("@")
        for qid, off in queues.items():
            rows.append({"replica": replica, "topic": topic, "group": group,
                         "queue_id": int(qid), "consumer_offset": int(off)})
    return rows


def dledger_rows(replica: str, store: Path) -> Iterator[dict[str, Any]]:
    """The DLedger-mode Raft log (``<store>/dledger/index/*.seg``, or ``log/*.seg`` of an
    older release; layouts in docs/formats.md): one row per entry with its term, index
    and how many messages it carries (counted in the commitlog bytes it refers to, or in
    the entry itself for an older release's); a damaged record ends the segment as one
    flagged row."""
    index_dir, old_dir = store / "dledger" / "index", store / "dledger" / "log"
    log_dir = index_dir if index_dir.is_dir() else old_dir
    if not log_dir.is_dir():
        return
    for path in sorted(log_dir.glob("*.seg")):
        data = path.read_bytes()
        pos = 0
        while pos + RECORD.size <= len(data):
            length, crc, index, term, typ = RECORD.unpack_from(data, pos)
            end = pos + 8 + length
            if length == 0 and not any(data[pos:pos + 64]):
                break
            bad = ("truncated" if end > len(data) else
                   "corrupt" if zlib.crc32(memoryview(data)[pos + 8:end]) != crc else None)
            row = {"replica": replica, "segment": path.name, "index": index, "term": term,
                   "type": typ, "data_length": length - (RECORD.size - 8),
                   "messages": 0, "status": bad or "ok", "reason": ""}
            if bad is not None:
                row["reason"] = f"record at byte {pos} of {path.name} is {bad}"
                yield row
                break
            body = data[pos + RECORD.size:end]
            if log_dir == index_dir and body[:1] == b"R":
                start, size = struct.unpack_from(">qI", body, 1)
                row["data_length"] = size
                row["messages"] = _records_in(store, start, start + size)
            elif typ == EntryType.NORMAL and log_dir == old_dir:
                try:
                    row["messages"] = len(decode_batch(body).records)
                except EntryFormatError as exc:
                    row["status"], row["reason"] = "corrupt", str(exc)
            yield row
            pos = end


def _records_in(store: Path, start: int, end: int) -> int:
    """Message records in the commitlog's ``[start, end)`` (blank records skipped)."""
    count = 0
    for path in segment_files(commitlog_dir(store)):
        first = int(path.name)
        lo, hi = max(start, first), min(end, first + path.stat().st_size)
        if lo >= hi:
            continue
        with open(path, "rb") as f:
            f.seek(lo - first)
            chunk = f.read(hi - lo)
        at = 0
        while at + PREFIX.size <= len(chunk):
            size, magic = PREFIX.unpack_from(chunk, at)
            if size <= 0:
                break
            count += magic == MESSAGE_MAGIC
            at += size
    return count
