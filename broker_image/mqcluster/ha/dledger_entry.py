"""What one Raft entry of a DLedger-mode group holds: commitlog records, ready made.

The layout: docs/formats.md, "DLedger entry". The leader encodes a write's commitlog
records once, where every replica's commitlog will hold them, and proposes that stretch
of the commitlog as one entry; each replica writes it into its commitlog as it appends
the entry (``ha.dledger_log``). Version 1 is still decoded for tools that read older
releases' logs; nothing else of older layouts is read. Pure: no I/O.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

from mqcluster.store.built import BuiltBatch
from mqcluster.store.message import MessageRecord

MAGIC = b"MQDL"
VERSION = 1
REGION_VERSION = 4
ENTRY_VERSION = REGION_VERSION
"""The layout this release writes and applies."""
PROPERTY_DLEDGER_INDEX = "DLEDGER_INDEX"
_HEAD = struct.Struct(">4sBqH")
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_REGION_HEAD = struct.Struct(">4sBqI")  # magic, version, regionStart, runsLength
REGION_HEAD_SIZE = _REGION_HEAD.size
_REGION_PREFIX = MAGIC + bytes([REGION_VERSION])
# start, storeTimestamp, firstQueueOffset, queueId, count; then topic, sizes, tags codes
_RUN_HEAD = struct.Struct(">qqqiI")


class EntryFormatError(ValueError):
    """Entry data that is not a DLedger message batch of this version."""


def encode_region(start: int, parts: list[bytes | memoryview], runs: bytes = b"") -> bytes:
    """An entry of commitlog bytes that go at ``start``, given in pieces, with the
    consume-queue entries of its producer batches (``encode_runs``)."""
    return b"".join([_REGION_HEAD.pack(MAGIC, REGION_VERSION, start, len(runs)), runs,
                     *parts])


def split_entry(data: bytes) -> tuple[int, memoryview, memoryview] | None:
    """A version 4 entry's region start, runs and commitlog bytes; None for any other
    data (runs past the entry: ``EntryFormatError``)."""
    if len(data) < REGION_HEAD_SIZE or data[:5] != _REGION_PREFIX:
        return None
    _, _, start, runs_length = _REGION_HEAD.unpack_from(data, 0)
    if REGION_HEAD_SIZE + runs_length > len(data):
        raise EntryFormatError(f"DLedger entry: runs of {runs_length} bytes past its end")
    view = memoryview(data)
    return (int(start), view[REGION_HEAD_SIZE:REGION_HEAD_SIZE + runs_length],
            view[REGION_HEAD_SIZE + runs_length:])


def region_start(data: bytes) -> int | None:
    """Where an entry's commitlog bytes go; None when it is not a version 4 entry."""
    parts = split_entry(data)
    return None if parts is None else parts[0]


def region_end(data: bytes) -> int:
    """Where an entry's commitlog bytes end (the entry is version 4, else
    ``EntryFormatError``): how far the consume queues may go once it commits."""
    parts = split_entry(data)
    if parts is None:
        version = data[4] if len(data) > 4 and data[:4] == MAGIC else None
        raise EntryFormatError(f"not a DLedger entry of version {REGION_VERSION} (version "
                               f"{version}, {len(data)} bytes): an entry of another release")
    return parts[0] + len(parts[2])


def encode_runs(runs: list[BuiltBatch]) -> bytes:
    """The consume-queue entries of producer batches placed in a region (their records
    are in the region, not here)."""
    out: list[bytes] = []
    for b in runs:
        topic, n = b.topic.encode(), len(b.sizes)
        out += (_RUN_HEAD.pack(b.start, b.store_timestamp, b.first_queue_offset, b.queue_id, n),
                _U16.pack(len(topic)), topic, struct.pack(f">{n}I", *b.sizes),
                struct.pack(f">{n}q", *b.tags_codes))
    return b"".join(out)


def decode_runs(data: bytes | memoryview) -> list[BuiltBatch]:
    """``encode_runs`` back (each run's records empty)."""
    runs: list[BuiltBatch] = []
    pos = 0
    try:
        while pos < len(data):
            start, ts, first, queue_id, n = _RUN_HEAD.unpack_from(data, pos)
            pos += _RUN_HEAD.size
            (topic_len,) = _U16.unpack_from(data, pos)
            topic = bytes(data[pos + 2:pos + 2 + topic_len]).decode()
            pos += 2 + topic_len
            sizes = list(struct.unpack_from(f">{n}I", data, pos))
            codes = list(struct.unpack_from(f">{n}q", data, pos + 4 * n))
            pos += 12 * n
            runs.append(BuiltBatch(topic, queue_id, first, start, sizes, codes, b"", ts))
    except (struct.error, UnicodeDecodeError) as exc:
        raise EntryFormatError(f"malformed runs in a DLedger entry: {exc}") from exc
    return runs


@dataclass(frozen=True)
class MessageBatch:
    store_timestamp: int
    store_host: str
    records: list[MessageRecord]


def mark_positions(props: list[bytes], index: int, start: int) -> list[bytes]:
    """The stored properties strings with ``DLEDGER_INDEX`` appended, message ``start``
    of entry ``index`` first."""
    mark = b"%s\x01%d." % (PROPERTY_DLEDGER_INDEX.encode(), index)
    return [b"%s%s%s%d\x02" % (p, b"" if not p or p[-1] == 2 else b"\x02", mark, i)
            for i, p in enumerate(props, start)]


def encode_batch(records: list[MessageRecord], store_timestamp: int, store_host: str) -> bytes:
    host = store_host.encode()
    out = [_HEAD.pack(MAGIC, VERSION, store_timestamp, len(host)), host,
           _U32.pack(len(records))]
    for r in records:
        header = json.dumps({
            "t": r.topic, "q": r.queue_id, "tg": r.tags, "k": r.keys, "p": r.properties,
            "bt": r.born_timestamp, "bh": r.born_host, "f": r.flag, "sf": r.sys_flag,
            "rt": r.reconsume_times, "pto": r.prepared_transaction_offset,
        }, separators=(",", ":")).encode()
        out += [_U32.pack(len(header)), header, _U32.pack(len(r.body)), r.body]
    return b"".join(out)


def decode_batch(data: bytes) -> MessageBatch:
    try:
        magic, version, ts, host_len = _HEAD.unpack_from(data, 0)
        if magic != MAGIC or version != VERSION:
            raise EntryFormatError(f"not a DLedger message batch (magic {magic!r}, "
                                   f"version {version})")
        pos = _HEAD.size
        host = data[pos:pos + host_len].decode()
        pos += host_len
        (count,) = _U32.unpack_from(data, pos)
        pos += 4
        records = []
        for _ in range(count):
            (n,) = _U32.unpack_from(data, pos)
            h = json.loads(data[pos + 4:pos + 4 + n])
            pos += 4 + n
            (m,) = _U32.unpack_from(data, pos)
            body = data[pos + 4:pos + 4 + m]
            if len(body) != m:
                raise EntryFormatError("message body runs past the entry")
            pos += 4 + m
            records.append(MessageRecord(
                h["t"], h["q"], body, h["tg"], list(h["k"]), dict(h["p"]), h["bt"], h["bh"],
                h["f"], h["sf"], h["rt"], h["pto"]))
    except (struct.error, KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, EntryFormatError):
            raise
        raise EntryFormatError(f"malformed DLedger message batch: {exc}") from exc
    if pos != len(data):
        raise EntryFormatError(f"{len(data) - pos} bytes after the last message")
    return MessageBatch(ts, host, records)
