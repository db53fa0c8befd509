"""What one Raft entry of a DLedger-mode group holds: a producer's batch of messages.

On disk the entries sit in the Raft log (``mqcluster.raft.diskformat``: each entry
framed with its term, index and CRC). Their data is one of two layouts, big-endian,
told apart by the version byte:

Version 3, the producer batches a leader gathered for one entry (one or more
sections, each one queue's batch) with their commitlog records already encoded: the
leader places them where every replica's commitlog will end when it applies the
entry (``store.built``), one after another, so a replica writes them as they are
(with one write while they stay in one commitlog segment)::

    magic "MQDL" (4)  version=3 (1)  storeHostLen (2) storeHost  index (8)
    sections (4), then per section:
      storeTimestamp (8)  firstPosition (4)  startOffset (8)  firstQueueOffset (8)
      topicLen (2) topic  bornHostLen (2) bornHost
      queueId (4)  bornTimestamp (8)  sysFlag (4)  reconsumeTimes (4)  count (4)
      sizes (count x 4)  tagsCodes (count x 8)  flags (count x 4)
      then the records, back to back, as ``store.codec`` lays them out; each one's
      properties end with ``DLEDGER_INDEX=<index>.<firstPosition + i>``

``index`` is the entry index the leader expected the entry to get. A replica whose
commitlog is not where a section's records were placed, or an entry that got another
index, stores that section by encoding the batch again from its records (same bytes
when the place is the same).

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
host, so every replica that applies the entry writes the same commitlog bytes. Every
replica reads versions 1 and 2; a leader proposes version 3 only once every replica has
said it reads it (``ENTRY_VERSION``), so a group can mix releases during a rolling
upgrade. Pure: no I/O.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

from mqcluster.store.batch import RawBatch
from mqcluster.store.built import BuiltBatch
from mqcluster.store.codec import FIXED_SIZE, I16, I32, short_field, topic_field
from mqcluster.store.message import MessageRecord

MAGIC = b"MQDL"
VERSION = 1
RAW_VERSION = 2
BUILT_VERSION = 3
ENTRY_VERSION = BUILT_VERSION
"""The newest layout this release reads."""
PROPERTY_DLEDGER_INDEX = "DLEDGER_INDEX"
_HEAD = struct.Struct(">4sBqH")
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_RAW_HEAD = struct.Struct(">iqiiI")  # queueId, bornTimestamp, sysFlag, reconsumeTimes, count
_RAW_MSG = struct.Struct(">iqII")  # flag, tagsCode, propertiesLen, bodyLen
_GROUP_HEAD = struct.Struct(">4sBH")  # magic, version, storeHostLen
_INDEX_COUNT = struct.Struct(">qI")  # index, sections
# storeTimestamp, firstPosition, startOffset, firstQueueOffset
_SECTION_HEAD = struct.Struct(">qIqq")


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


@dataclass(frozen=True)
class BuiltEntry:
    """One section of a version 3 entry: a producer batch whose records ``built`` holds
    (its messages are positions ``first_position`` on of entry ``index``), and what
    encoding it again needs."""

    index: int
    store_host: str
    born_host: str
    born_timestamp: int
    sys_flag: int
    reconsume_times: int
    flags: list[int]
    built: BuiltBatch
    first_position: int = 0


@dataclass(frozen=True)
class BuiltGroup:
    """A version 3 entry: the batches a leader gathered for one entry."""

    index: int
    store_host: str
    sections: list[BuiltEntry]


def _str16(data: bytes, pos: int) -> tuple[str, int]:
    """A string after its 2-byte length at ``pos``, and the position after it."""
    (n,) = _U16.unpack_from(data, pos)
    return data[pos + 2:pos + 2 + n].decode(), pos + 2 + n


def mark_positions(props: list[bytes], index: int, start: int) -> list[bytes]:
    """The stored properties strings with ``DLEDGER_INDEX`` appended, message ``start``
    of entry ``index`` first."""
    mark = b"%s\x01%d." % (PROPERTY_DLEDGER_INDEX.encode(), index)
    return [b"%s%s%s%d\x02" % (p, b"" if not p or p[-1] == 2 else b"\x02", mark, i)
            for i, p in enumerate(props, start)]


def encode_built(group: BuiltGroup) -> bytes:
    host = group.store_host.encode()
    out: list[bytes | memoryview] = [
        _GROUP_HEAD.pack(MAGIC, BUILT_VERSION, len(host)), host,
        _INDEX_COUNT.pack(group.index, len(group.sections))]
    for sec in group.sections:
        b = sec.built
        topic, born = b.topic.encode(), sec.born_host.encode()
        n = len(b.sizes)
        out += (_SECTION_HEAD.pack(b.store_timestamp, sec.first_position, b.start,
                                   b.first_queue_offset),
                _U16.pack(len(topic)), topic, _U16.pack(len(born)), born,
                _RAW_HEAD.pack(b.queue_id, sec.born_timestamp, sec.sys_flag,
                               sec.reconsume_times, n),
                struct.pack(f">{n}I", *b.sizes), struct.pack(f">{n}q", *b.tags_codes),
                struct.pack(f">{n}i", *sec.flags), b.records)
    return b"".join(out)


def _decode_built(data: bytes) -> BuiltGroup:
    try:
        _, _, host_len = _GROUP_HEAD.unpack_from(data, 0)
        pos = _GROUP_HEAD.size
        host = data[pos:pos + host_len].decode()
        pos += host_len
        index, n_sections = _INDEX_COUNT.unpack_from(data, pos)
        pos += _INDEX_COUNT.size
        view = memoryview(data)
        sections = []
        for _ in range(n_sections):
            ts, first_position, start, first_queue_offset = _SECTION_HEAD.unpack_from(data, pos)
            pos += _SECTION_HEAD.size
            topic, pos = _str16(data, pos)
            born, pos = _str16(data, pos)
            queue_id, born_ts, sys_flag, reconsume, count = _RAW_HEAD.unpack_from(data, pos)
            pos += _RAW_HEAD.size
            sizes = list(struct.unpack_from(f">{count}I", data, pos))
            pos += 4 * count
            codes = list(struct.unpack_from(f">{count}q", data, pos))
            pos += 8 * count
            flags = list(struct.unpack_from(f">{count}i", data, pos))
            pos += 4 * count
            total = sum(sizes)
            if not count or pos + total > len(data):
                raise EntryFormatError(f"DLedger built entry {index}: a section of {count} "
                                       f"records of {total} bytes runs past the entry")
            built = BuiltBatch(topic, queue_id, first_queue_offset, start, sizes, codes,
                               view[pos:pos + total], ts)
            pos += total
            sections.append(BuiltEntry(index, host, born, born_ts, sys_flag, reconsume,
                                       flags, built, first_position))
    except (struct.error, UnicodeDecodeError) as exc:
        raise EntryFormatError(f"malformed DLedger built entry: {exc}") from exc
    if not sections or pos != len(data):
        raise EntryFormatError(f"DLedger built entry {index}: {len(data) - pos} bytes after "
                               f"{len(sections)} sections")
    return BuiltGroup(index, host, sections)


def unbuilt(entry: BuiltEntry) -> RawBatch:
    """The producer's batch back from a section's records (without the marks the
    leader added), to be stored by encoding it again."""
    b = entry.built
    data = b.records
    skip_hosts = FIXED_SIZE + len(short_field(entry.born_host)) + len(short_field(
        entry.store_host))
    skip_topic = len(topic_field(b.topic))
    bodies, props = [], []
    pos = 0
    try:
        for i, size in enumerate(b.sizes, entry.first_position):
            at = pos + skip_hosts
            (blen,) = I32.unpack_from(data, at)
            bodies.append(bytes(data[at + 4:at + 4 + blen]))
            at += 4 + blen + skip_topic
            (plen,) = I16.unpack_from(data, at)
            raw = bytes(data[at + 2:at + 2 + plen])
            mark = b"%s\x01%d.%d\x02" % (PROPERTY_DLEDGER_INDEX.encode(), entry.index, i)
            if not raw.endswith(mark) or at + 2 + plen != pos + size:
                raise EntryFormatError(f"record {i} of built entry {entry.index} is not "
                                       f"the one its header describes")
            props.append(raw[:-len(mark)])
            pos += size
    except struct.error as exc:
        raise EntryFormatError(f"malformed record in DLedger built entry: {exc}") from exc
    return RawBatch(b.topic, b.queue_id, entry.born_host, entry.born_timestamp, bodies, props,
                    list(b.tags_codes), list(entry.flags), entry.sys_flag,
                    entry.reconsume_times)


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


def decode_entry(data: bytes) -> MessageBatch | RawEntry | BuiltGroup:
    """Any layout, by its version byte."""
    if len(data) > _HEAD.size and data[:4] == MAGIC:
        if data[4] == BUILT_VERSION:
            return _decode_built(data)
        if data[4] == RAW_VERSION:
            return _decode_raw(data)
    return decode_batch(data)


def _decode_raw(data: bytes) -> RawEntry:
    try:
        _, _, ts, host_len = _HEAD.unpack_from(data, 0)
        pos = _HEAD.size
        host = data[pos:pos + host_len].decode()
        pos += host_len
        topic, pos = _str16(data, pos)
        born, pos = _str16(data, pos)
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
