"""What one Raft entry of a DLedger-mode group holds: a producer's batch of messages.

On disk the entries sit in the Raft log (``mqcluster.raft.diskformat``: each entry
framed with its term, index and CRC). Their data is one of two layouts, big-endian,
told apart by the version byte:

Version 2, one queue's batch as the producer sent it (``SEND_BATCH_MESSAGE``)::

    magic "MQDL" (4)  version=2 (1)  storeTimestamp (8)  storeHostLen (2) storeHost
    topicLen (2) topic  bornHostLen (2) bornHost
    queueId (4)  bornTimestamp (8)  sysFlag (4)  reconsumeTimes (4)  count (4)
    then per message:  flag (4)  tagsCode (8)  propertiesLen (4)  bodyLen (4)
                       properties (RocketMQ's name\x01value\x02 string)  body

Version 1, messages of any kind, one by one (single sends, transactional messages)::

    magic "MQDL" (4)  version=1 (1)  storeTimestamp (8)  storeHostLen (2) storeHost
    count (4), then per message:  headerLen (4) header (JSON)  bodyLen (4) body

The version 1 header names the message's fields (topic, queue id, tags, keys,
properties, born time and host, flags). The leader fixes the store timestamp and store
host, so every replica that applies the entry writes the same commitlog bytes. Both
versions are read whatever a replica writes, so a group can mix them during a rolling
upgrade. Pure: no I/O.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

from mqcluster.store.batch import RawBatch
from mqcluster.store.message import MessageRecord

MAGIC = b"MQDL"
VERSION = 1
RAW_VERSION = 2
_HEAD = struct.Struct(">4sBqH")
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_RAW_HEAD = struct.Struct(">iqiiI")  # queueId, bornTimestamp, sysFlag, reconsumeTimes, count
_RAW_MSG = struct.Struct(">iqII")  # flag, tagsCode, propertiesLen, bodyLen


class EntryFormatError(ValueError):
    """Entry data that is not a DLedger message batch of this version."""


@dataclass(frozen=True)
class MessageBatch:
    store_timestamp: int
    store_host: str
    records: list[MessageRecord]


@dataclass(frozen=True)
class RawEntry:
    store_timestamp: int
    store_host: str
    batch: RawBatch


def encode_raw_batch(batch: RawBatch, store_timestamp: int, store_host: str) -> bytes:
    host, topic, born = (store_host.encode(), batch.topic.encode(), batch.born_host.encode())
    out = [_HEAD.pack(MAGIC, RAW_VERSION, store_timestamp, len(host)), host,
           _U16.pack(len(topic)), topic, _U16.pack(len(born)), born,
           _RAW_HEAD.pack(batch.queue_id, batch.born_timestamp, batch.sys_flag,
                          batch.reconsume_times, len(batch.bodies))]
    pack = _RAW_MSG.pack
    for body, props, code, flag in zip(batch.bodies, batch.properties, batch.tags_codes,
                                       batch.flags, strict=True):
        out += (pack(flag, code, len(props), len(body)), props, body)
    return b"".join(out)


def decode_entry(data: bytes) -> MessageBatch | RawEntry:
    """Either layout, by its version byte."""
    if len(data) > _HEAD.size and data[:4] == MAGIC and data[4] == RAW_VERSION:
        return _decode_raw(data)
    return decode_batch(data)


def _decode_raw(data: bytes) -> RawEntry:
    try:
        _, _, ts, host_len = _HEAD.unpack_from(data, 0)
        pos = _HEAD.size
        host = data[pos:pos + host_len].decode()
        pos += host_len
        (n,) = _U16.unpack_from(data, pos)
        topic = data[pos + 2:pos + 2 + n].decode()
        pos += 2 + n
        (n,) = _U16.unpack_from(data, pos)
        born = data[pos + 2:pos + 2 + n].decode()
        pos += 2 + n
        queue_id, born_ts, sys_flag, reconsume, count = _RAW_HEAD.unpack_from(data, pos)
        pos += _RAW_HEAD.size
        bodies: list[bytes] = []
        props: list[bytes] = []
        codes: list[int] = []
        flags: list[int] = []
        unpack, size = _RAW_MSG.unpack_from, _RAW_MSG.size
        for _ in range(count):
            flag, code, plen, blen = unpack(data, pos)
            pos += size
            props.append(data[pos:pos + plen])
            pos += plen
            bodies.append(data[pos:pos + blen])
            pos += blen
            codes.append(code)
            flags.append(flag)
    except (struct.error, UnicodeDecodeError) as exc:
        raise EntryFormatError(f"malformed DLedger batch entry: {exc}") from exc
    if pos != len(data):
        raise EntryFormatError(f"DLedger batch entry length disagrees by {len(data) - pos} "
                               f"bytes")
    return RawEntry(ts, host, RawBatch(topic, queue_id, born, born_ts, bodies, props, codes,
                                       flags, sys_flag, reconsume))


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
