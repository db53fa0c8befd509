"""What one Raft entry of a DLedger-mode group holds: a producer's batch of messages.

On disk the entries sit in the Raft log (``mqcluster.raft.diskformat``: each entry
framed with its term, index and CRC). Their data is this layout, big-endian:

    magic "MQDL" (4)  version (1)  storeTimestamp (8)  storeHostLen (2) storeHost
    count (4), then per message:  headerLen (4) header (JSON)  bodyLen (4) body

The header names the message's fields (topic, queue id, tags, keys, properties, born
time and host, flags). The leader fixes the store timestamp and store host, so every
replica that applies the entry writes the same commitlog bytes. Pure: no I/O.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

from mqcluster.store.message import MessageRecord

MAGIC = b"MQDL"
VERSION = 1
_HEAD = struct.Struct(">4sBqH")
_U32 = struct.Struct(">I")


class EntryFormatError(ValueError):
    """Entry data that is not a DLedger message batch of this version."""


@dataclass(frozen=True)
class MessageBatch:
    store_timestamp: int
    store_host: str
    records: list[MessageRecord]


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
