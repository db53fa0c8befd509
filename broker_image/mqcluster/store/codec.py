"""Commitlog records, encoding and parsing.

The record layout, its CRC and the blank record that pads a segment's end:
docs/formats.md, "Commitlog record".
"""

from __future__ import annotations

import functools
import ipaddress
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from mqcluster.common.crc import crc32
from mqcluster.protocol.properties import (
    KEY_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
)
from mqcluster.store.filter import tags_code
from mqcluster.store.message import MessageRecord, StoredMessage

MESSAGE_MAGIC = 0xDAA320A7 - (1 << 32)
BLANK_MAGIC = 0xCBD43194 - (1 << 32)
HEADER = struct.Struct(">iiiiiqqiqqiq")
PREFIX = struct.Struct(">ii")
TAIL_FIXED = struct.Struct(">iiqqiqqiq")
CRC_PREFIX = struct.Struct(">iiI")
I32 = struct.Struct(">i")
I16 = struct.Struct(">h")
FIXED_SIZE = HEADER.size
END_FILE_MIN_BLANK_LENGTH = PREFIX.size
CRC_FROM = 12
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

TRANSACTION_TYPE_MASK = 0x3 << 2
TRANSACTION_PREPARED_TYPE = 0x1 << 2
TRANSACTION_ROLLBACK_TYPE = 0x3 << 2


NO_QUEUE_OFFSET_TYPES = frozenset((TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE))


def consumes_queue_offset(sys_flag: int) -> bool:
    """Prepared and rolled-back transaction messages get no queue offset and no CQ entry."""
    return sys_flag & TRANSACTION_TYPE_MASK not in NO_QUEUE_OFFSET_TYPES


def encode_properties(props: dict[str, str]) -> bytes:
    return "".join([f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}"
                    for k, v in props.items()]).encode("utf-8")


def decode_properties(raw: bytes) -> dict[str, str]:
    props: dict[str, str] = {}
    for item in raw.decode("utf-8").split(PROPERTY_SEPARATOR):
        if item:
            k, _, v = item.partition(NAME_VALUE_SEPARATOR)
            props[k] = v
    return props


@functools.lru_cache(maxsize=64)
def _host_prefix(store_host: str) -> str:
    host, _, port = store_host.rpartition(":")
    try:
        addr = int(ipaddress.IPv4Address(host))
        port_num = int(port)
    except ValueError:
        addr, port_num = crc32(store_host.encode()), 0
    return f"{addr:08X}{port_num:08X}"


def offset_msg_id(store_host: str, offset: int) -> str:
    """RocketMQ's offset message id: store IPv4 address, port and commitlog offset in hex."""
    return f"{_host_prefix(store_host)}{offset:016X}"


def record_properties(rec: MessageRecord) -> dict[str, str]:
    props = dict(rec.properties)
    if rec.tags:
        props[PROPERTY_TAGS] = rec.tags
    if rec.keys:
        props[PROPERTY_KEYS] = KEY_SEPARATOR.join(rec.keys)
    return props


def record_tags(rec: MessageRecord) -> str | None:
    """The tag the record is stored with (``tags``, else a ``TAGS`` property)."""
    return rec.tags or rec.properties.get(PROPERTY_TAGS)


@functools.lru_cache(maxsize=256)
def short_field(text: str) -> bytes:
    """A host string as stored: length (1 byte) and UTF-8 bytes (longer ones fail validation)."""
    raw = text.encode("utf-8")
    return bytes((len(raw) & 0xFF,)) + raw


@functools.lru_cache(maxsize=4096)
def topic_field(topic: str) -> bytes:
    raw = topic.encode("utf-8")
    return I16.pack(len(raw) & 0x7FFF) + raw


@dataclass(slots=True)
class EncodedParts:
    """A record's variable parts, encoded once and reused when its position is known.

    ``hosts`` is ``bornHost`` and ``storeHost`` with their length bytes; ``topic`` and
    ``props`` are the raw strings (their length fields are added by ``encode``).
    """

    rec: MessageRecord
    born_host: bytes
    store_host: bytes
    topic: bytes
    props: bytes
    size: int
    hosts: bytes = b""
    topic_field: bytes = b""


def prepare(rec: MessageRecord, store_host: str) -> EncodedParts:
    return prepare_all([rec], store_host)[0]


def prepare_all(recs: Sequence[MessageRecord], store_host: str) -> list[EncodedParts]:
    """``prepare`` of each record; the host and topic fields are encoded once per batch."""
    store_field = short_field(store_host)
    store_raw = store_field[1:]
    shared: dict[tuple[str, str], tuple[bytes, bytes, int, bytes, bytes]] = {}
    out: list[EncodedParts] = []
    for rec in recs:
        key = (rec.topic, rec.born_host)
        fields = shared.get(key)
        if fields is None:
            born_field = short_field(rec.born_host)
            topic_bytes = topic_field(rec.topic)
            fixed = FIXED_SIZE + len(born_field) + len(store_field) + 4 + len(topic_bytes) + 2
            fields = shared[key] = (born_field + store_field, topic_bytes, fixed,
                                    born_field[1:], topic_bytes[2:])
        hosts, topic_bytes, fixed, born_raw, topic_raw = fields
        props = encode_properties(
            record_properties(rec) if rec.tags or rec.keys else rec.properties)
        out.append(EncodedParts(rec, born_raw, store_raw, topic_raw, props,
                                fixed + len(rec.body) + len(props), hosts, topic_bytes))
    return out


def encode(parts: EncodedParts, queue_offset: int, physical_offset: int,
           store_timestamp: int) -> bytes:
    rec = parts.rec
    body = rec.body
    props = parts.props
    tail = b"".join((
        TAIL_FIXED.pack(rec.queue_id, rec.flag, queue_offset, physical_offset,
                         rec.sys_flag, rec.born_timestamp, store_timestamp, rec.reconsume_times,
                         rec.prepared_transaction_offset),
        parts.hosts, I32.pack(len(body)), body, parts.topic_field,
        I16.pack(len(props)), props,
    ))
    return CRC_PREFIX.pack(parts.size, MESSAGE_MAGIC, crc32(tail)) + tail


def encode_blank(length: int) -> bytes:
    return PREFIX.pack(length, BLANK_MAGIC)


class RecordKind(Enum):
    MESSAGE = "message"
    BLANK = "blank"
    END = "end"            # zeros: nothing was ever written here
    INCOMPLETE = "incomplete"  # the buffer ends inside the record
    CORRUPT = "corrupt"


@dataclass(slots=True)
class DispatchInfo:
    """What the consume queue needs from a record, read without decoding the body."""

    topic: str
    queue_id: int
    queue_offset: int
    commitlog_offset: int
    size: int
    tags_code: int
    store_timestamp: int
    sys_flag: int


@dataclass(slots=True)
class Checked:
    kind: RecordKind
    size: int = 0
    info: DispatchInfo | None = None
    reason: str = ""


def _skip_bytes(buf: bytes | memoryview, pos: int, width: int) -> tuple[int, int]:
    n = int.from_bytes(buf[pos:pos + width], "big", signed=width > 1)
    return n, pos + width + n


_TAGS_KEY = (PROPERTY_TAGS + NAME_VALUE_SEPARATOR).encode()
_PROPERTY_SEP = PROPERTY_SEPARATOR.encode()[0]
_topic_names: dict[bytes, str] = {}
"""Decoded topic names: a store holds few topics and every record names one."""
_TOPIC_CACHE_MAX = 4096


def _topic_name(raw: bytes) -> str:
    name = _topic_names.get(raw)
    if name is None:
        name = raw.decode("utf-8")
        if len(_topic_names) < _TOPIC_CACHE_MAX:
            _topic_names[raw] = name
    return name


def _tags_in(buf: bytes, start: int, end: int) -> str | None:
    """The TAGS property among the properties in ``buf[start:end]``, without copying."""
    i = buf.find(_TAGS_KEY, start, end)
    while i >= 0:
        if i == start or buf[i - 1] == _PROPERTY_SEP:
            j = buf.find(_PROPERTY_SEP.to_bytes(), i, end)
            return buf[i + len(_TAGS_KEY):j if j >= 0 else end].decode("utf-8")
        i = buf.find(_TAGS_KEY, i + 1, end)
    return None


def check(buf: bytes | memoryview, pos: int, expected_offset: int, verify_crc: bool,
          max_size: int) -> Checked:
    """Classify the record at ``buf[pos:]`` that should sit at commitlog ``expected_offset``.

    Every record a replica dispatches passes through here: the variable-length fields
    are stepped over with fixed-width reads, and nothing but the topic is copied."""
    avail = len(buf) - pos
    if avail < PREFIX.size:
        return Checked(RecordKind.INCOMPLETE if any(buf[pos:]) else RecordKind.END)
    size, magic = PREFIX.unpack_from(buf, pos)
    if size == 0 and magic == 0:
        return Checked(RecordKind.END)
    if magic == BLANK_MAGIC:
        if size < PREFIX.size:
            return Checked(RecordKind.CORRUPT, reason=f"blank record of size {size}")
        return Checked(RecordKind.BLANK, size)
    if magic != MESSAGE_MAGIC:
        return Checked(RecordKind.CORRUPT, reason=f"bad magic code {magic & 0xFFFFFFFF:#x}")
    if size < HEADER.size or size > max_size:
        return Checked(RecordKind.CORRUPT, reason=f"bad total size {size}")
    if avail < size:
        return Checked(RecordKind.INCOMPLETE, size)
    (_, _, crc, queue_id, _, queue_offset, physical, sys_flag, _, store_ts, _, _
     ) = HEADER.unpack_from(buf, pos)
    if verify_crc and crc32(buf[pos + CRC_FROM:pos + size]) != crc & 0xFFFFFFFF:
        return Checked(RecordKind.CORRUPT, size, reason="CRC mismatch")
    if physical != expected_offset:
        return Checked(RecordKind.CORRUPT, size,
                       reason=f"physical offset field {physical} != position {expected_offset}")
    record_end = pos + size
    try:
        p = pos + FIXED_SIZE
        p += 1 + buf[p]  # bornHost
        p += 1 + buf[p]  # storeHost
        body_len = I32.unpack_from(buf, p)[0]
        p += 4 + body_len
        topic_len = I16.unpack_from(buf, p)[0]
        props_at = p + 2 + topic_len
        props_len = I16.unpack_from(buf, props_at)[0] if props_at < record_end else -1
    except (IndexError, struct.error):
        return Checked(RecordKind.CORRUPT, size, reason="field lengths disagree with size")
    end = props_at + 2 + props_len
    if end != record_end or body_len < 0 or topic_len < 0 or props_len < 0:
        return Checked(RecordKind.CORRUPT, size, reason="field lengths disagree with size")
    try:
        topic = _topic_name(bytes(buf[p + 2:props_at]))
        tags = (_tags_in(buf, props_at + 2, end) if isinstance(buf, bytes)
                else _find_property(bytes(buf[props_at + 2:end]), PROPERTY_TAGS))
    except (UnicodeDecodeError, ValueError) as exc:
        return Checked(RecordKind.CORRUPT, size, reason=f"undecodable record: {exc}")
    info = DispatchInfo(topic, queue_id, queue_offset, physical, size, tags_code(tags),
                        store_ts, sys_flag)
    return Checked(RecordKind.MESSAGE, size, info)


DispatchEntry = tuple[int, int, int, int]
"""queue offset, commitlog offset, size, tags code: one consume-queue entry."""


def dispatch_run(buf: bytes, base: int, max_size: int,
                 bucket_for: Callable[[str, int], list[DispatchEntry]]) -> tuple[int, int]:
    """Step over the well-formed message records at the head of ``buf`` (which sits at
    commitlog offset ``base``), appending each one's consume-queue entry to the list
    ``bucket_for(topic, queue_id)`` names (asked once per run of one queue).

    Returns the bytes stepped over and the store timestamp of the last record (-1 if
    none). It stops at the first record that is not a whole, consistent message inside
    ``buf`` and leaves that one to ``check``, which says what it is. The same checks as
    ``check`` without CRC, with no objects per record: a replica dispatches every
    record it copies through here."""
    i, n, last_ts = 0, len(buf), -1
    unpack, i32, i16 = HEADER.unpack_from, I32.unpack_from, I16.unpack_from
    no_queue, tx_mask, tags_key = NO_QUEUE_OFFSET_TYPES, TRANSACTION_TYPE_MASK, _TAGS_KEY
    last_topic, last_qid = b"", -1
    bucket: list[DispatchEntry] = []
    try:
        while n - i >= FIXED_SIZE:
            (size, magic, _, queue_id, _, queue_offset, physical, sys_flag, _, store_ts, _, _
             ) = unpack(buf, i)
            end = i + size
            if (magic != MESSAGE_MAGIC or size < FIXED_SIZE or size > max_size or end > n
                    or physical != base + i):
                break
            p = i + FIXED_SIZE
            p += 1 + buf[p]  # bornHost
            p += 1 + buf[p]  # storeHost
            body_len = i32(buf, p)[0]
            p += 4 + body_len
            topic_len = i16(buf, p)[0]
            props_at = p + 2 + topic_len
            if body_len < 0 or topic_len < 0 or props_at + 2 > end:
                break
            props_len = i16(buf, props_at)[0]
            if props_len < 0 or props_at + 2 + props_len != end:
                break
            if sys_flag & tx_mask not in no_queue:
                topic_raw = buf[p + 2:props_at]
                tags = (_tags_in(buf, props_at + 2, end)
                        if buf.find(tags_key, props_at + 2, end) >= 0 else None)
                if queue_id != last_qid or topic_raw != last_topic:
                    bucket = bucket_for(_topic_name(topic_raw), queue_id)
                    last_topic, last_qid = topic_raw, queue_id
                bucket.append((queue_offset, physical, size, tags_code(tags) if tags else 0))
            last_ts = store_ts
            i = end
    except (IndexError, struct.error, UnicodeDecodeError):
        pass  # the record at ``i``: ``check`` names what is wrong with it
    return i, last_ts


def _find_property(raw: bytes, name: str) -> str | None:
    key = name.encode() + NAME_VALUE_SEPARATOR.encode()
    start = 0
    while True:
        i = raw.find(key, start)
        if i < 0:
            return None
        if i == 0 or raw[i - 1:i] == PROPERTY_SEPARATOR.encode():
            j = raw.find(PROPERTY_SEPARATOR.encode(), i)
            return raw[i + len(key):j if j >= 0 else len(raw)].decode("utf-8")
        start = i + 1


def decode(buf: bytes | memoryview, pos: int = 0) -> StoredMessage:
    """Decode a whole message record (already checked) into a ``StoredMessage``."""
    (size, _, crc, queue_id, flag, queue_offset, physical, sys_flag, born_ts, store_ts,
     reconsume, prep_tx) = HEADER.unpack_from(buf, pos)
    p = pos + HEADER.size
    _, q = _skip_bytes(buf, p, 1)
    born_host = bytes(buf[p + 1:q]).decode("utf-8")
    _, p = _skip_bytes(buf, q, 1)
    store_host = bytes(buf[q + 1:p]).decode("utf-8")
    _, q = _skip_bytes(buf, p, 4)
    body = bytes(buf[p + 4:q])
    _, p = _skip_bytes(buf, q, 2)
    topic = bytes(buf[q + 2:p]).decode("utf-8")
    _, q = _skip_bytes(buf, p, 2)
    props = decode_properties(bytes(buf[p + 2:q]))
    tags = props.pop(PROPERTY_TAGS, None)
    keys_raw = props.pop(PROPERTY_KEYS, "")
    off_id = offset_msg_id(store_host, physical)
    return StoredMessage(
        topic=topic, queue_id=queue_id, body=body, tags=tags,
        keys=[k for k in keys_raw.split(KEY_SEPARATOR) if k], properties=props,
        born_timestamp=born_ts, born_host=born_host, flag=flag, sys_flag=sys_flag,
        reconsume_times=reconsume, prepared_transaction_offset=prep_tx,
        msg_id=props.get(PROPERTY_UNIQ_KEY) or off_id, queue_offset=queue_offset,
        commitlog_offset=physical, store_size=size, store_timestamp=store_ts,
        store_host=store_host, body_crc=crc & 0xFFFFFFFF, offset_msg_id=off_id,
    )
