"""Message encodings of the broker's internal protocol (pure, tested on bytes).

Request and response *headers* travel in the frame's ``extFields`` (see
``protocol.broker``). Message *bodies* travel in the frame body:

SEND_MESSAGE (10) / SEND_MESSAGE_V2 (310) carry the message body as it is,
SEND_BATCH_MESSAGE (320) RocketMQ's batch entries, and PULL_MESSAGE (11) answers a
sequence of messages with their store fields: docs/formats.md, "Broker message bodies".
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from mqcluster.common.crc import crc32
from mqcluster.protocol.names import properties_text_problem, tag_problem
from mqcluster.protocol.properties import KEY_SEPARATOR, PROPERTY_KEYS, PROPERTY_TAGS

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
BATCH_MAGIC = 0xAABBCCDD
PULL_MAGIC = 0xDAA320A7
MAX_PROPERTIES_SIZE = 32767

_BATCH_HEAD = struct.Struct(">IIIII")
_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_PULL_HEAD = struct.Struct(">IIIiiqqiq")
_PULL_TAIL = struct.Struct(">iqI")
_I64 = struct.Struct(">q")


class CodecError(ValueError):
    """A message body or properties string is malformed."""


def encode_properties(props: dict[str, str]) -> str:
    text = "".join([f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in props.items()])
    n = len(props)
    if text.count(NAME_VALUE_SEPARATOR) != n or text.count(PROPERTY_SEPARATOR) != n:
        for name, value in props.items():
            for ch in (NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR):
                if ch in name or ch in value:
                    raise CodecError(f"property {name!r} contains a reserved separator")
    return text


def _check_text(text: str) -> None:
    """The shared rules (``protocol.names``): no control character but the separators."""
    problem = properties_text_problem(text)
    if problem is not None:
        raise CodecError(problem)


def _check_tags(tags: str | None) -> None:
    if tags:
        problem = tag_problem(tags)
        if problem is not None:
            raise CodecError(problem)


def decode_properties(text: str | None) -> dict[str, str]:
    props: dict[str, str] = {}
    if not text:
        return props
    _check_text(text)
    for item in text.split(PROPERTY_SEPARATOR):
        if not item:
            continue
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if not sep or not name:
            raise CodecError(f"property entry {item!r} is not name\\x01value")
        props[name] = value
    return props


@dataclass
class WireMessage:
    """A message as a producer sends it: body, tags, keys, user properties."""

    body: bytes
    tags: str | None = None
    keys: list[str] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0

    def all_properties(self) -> dict[str, str]:
        """User properties plus TAGS and KEYS, as the properties string carries them."""
        props = dict(self.properties)
        if self.tags:
            props[PROPERTY_TAGS] = self.tags
        if self.keys:
            props[PROPERTY_KEYS] = KEY_SEPARATOR.join(self.keys)
        return props

    @classmethod
    def from_properties(cls, body: bytes, props: dict[str, str], flag: int = 0) -> WireMessage:
        return cls._taking(body, dict(props), flag)

    @classmethod
    def _taking(cls, body: bytes, props: dict[str, str], flag: int) -> WireMessage:
        """Like ``from_properties`` but takes ownership of ``props`` (no copy)."""
        tags = props.pop(PROPERTY_TAGS, None) or None
        _check_tags(tags)
        keys_text = props.pop(PROPERTY_KEYS, None)
        keys = [k for k in keys_text.split(KEY_SEPARATOR) if k] if keys_text else []
        return cls(body, tags, keys, props, flag)


def properties_bytes(props: dict[str, str]) -> bytes:
    raw = encode_properties(props).encode("utf-8")
    if len(raw) > MAX_PROPERTIES_SIZE:
        raise CodecError(f"properties of {len(raw)} bytes exceed {MAX_PROPERTIES_SIZE}")
    return raw


def encode_batch_entry(body: bytes, props: bytes, flag: int = 0) -> bytes:
    """One entry of a SEND_BATCH_MESSAGE body; ``props`` as :func:`properties_bytes` gives."""
    total = _BATCH_HEAD.size + len(body) + _U16.size + len(props)
    head = _BATCH_HEAD.pack(total, BATCH_MAGIC, crc32(body), flag & 0xFFFFFFFF, len(body))
    return b"".join((head, body, _U16.pack(len(props)), props))


def encode_batch(messages: Sequence[WireMessage]) -> bytes:
    return b"".join(
        [encode_batch_entry(m.body, properties_bytes(m.all_properties()), m.flag) for m in messages]
    )


def _batch_entries(data: bytes) -> Iterator[tuple[int, bytes, bytes, int]]:
    """Each batch entry's ``(start, body, encoded properties, flag)``, its sizes and body CRC
    checked; the one walk under :func:`decode_batch` and :func:`decode_batch_raw`."""
    unpack_head = _BATCH_HEAD.unpack_from
    head_size = _BATCH_HEAD.size
    size = len(data)
    pos = 0
    while pos < size:
        if size - pos < head_size:
            raise CodecError(f"truncated batch entry at byte {pos}")
        total, _magic, crc, flag, body_len = unpack_head(data, pos)
        end = pos + total
        if total < head_size + 2 or end > size:
            raise CodecError(f"batch entry at byte {pos} has bad totalSize {total}")
        body_start = pos + head_size
        props_at = body_start + body_len
        if props_at + 2 > end:
            raise CodecError(f"batch entry at byte {pos} has bad bodyLen {body_len}")
        body = data[body_start:props_at]
        if crc and crc32(body) != crc:
            raise CodecError(f"batch entry at byte {pos}: body CRC mismatch")
        if props_at + 2 + (data[props_at] << 8 | data[props_at + 1]) != end:
            raise CodecError(f"batch entry at byte {pos} has bad propertiesLen")
        yield pos, body, data[props_at + 2 : end], flag
        pos = end


def decode_batch(data: bytes) -> list[WireMessage]:
    if not isinstance(data, bytes):
        data = bytes(data)
    messages: list[WireMessage] = []
    taking = WireMessage._taking
    for pos, body, props, flag in _batch_entries(data):
        try:
            text = props.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CodecError(f"batch entry at byte {pos}: properties not UTF-8") from exc
        messages.append(taking(body, decode_properties(text), flag))
    if not messages:
        raise CodecError("empty batch")
    return messages


@dataclass(slots=True)
class RawMessages:
    """A batch body split into parallel lists; ``properties`` stay encoded (UTF-8 bytes)."""

    bodies: list[bytes]
    properties: list[bytes]
    tags: list[str | None]
    flags: list[int]


def _tags_of(text: str) -> str | None:
    """The TAGS value of a properties string; CodecError as ``decode_properties``'s."""
    _check_text(text)
    tags = None
    for item in text.split(PROPERTY_SEPARATOR):
        if item:
            name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
            if not sep or not name:
                raise CodecError(f"property entry {item!r} is not name\\x01value")
            if name == PROPERTY_TAGS:
                tags = value
    _check_tags(tags)
    return tags


def decode_single_raw(body: bytes, properties: str, flag: int) -> RawMessages | None:
    """SEND_MESSAGE(_V2)'s one message as :class:`RawMessages` (``None``: general path)."""
    tags = _tags_of(properties)
    if tags == "":
        return None
    return RawMessages([body], [properties.encode("utf-8")], [tags], [flag])


def decode_batch_raw(data: bytes) -> RawMessages | None:
    """Like :func:`decode_batch` (same checks, same errors) without decoding properties into
    dicts; ``None`` when a message needs the general path (an empty TAGS value)."""
    if not isinstance(data, bytes):
        data = bytes(data)
    out = RawMessages([], [], [], [])
    for pos, body, props, flag in _batch_entries(data):
        try:
            tags = _tags_of(props.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise CodecError(f"batch entry at byte {pos}: properties not UTF-8") from exc
        if tags == "":
            return None
        out.bodies.append(body)
        out.properties.append(props)
        out.tags.append(tags)
        out.flags.append(flag)
    if not out.bodies:
        raise CodecError("empty batch")
    return out


# ------------------------------------------------------------------ pull


@dataclass
class PulledMessage:
    """A message as a consumer receives it."""

    topic: str
    queue_id: int
    queue_offset: int
    commitlog_offset: int
    body: bytes
    tags: str | None
    keys: list[str]
    properties: dict[str, str]
    msg_id: str
    offset_msg_id: str
    born_timestamp: int
    store_timestamp: int
    born_host: str = ""
    store_host: str = ""
    flag: int = 0
    sys_flag: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    body_crc: int = 0


def _short_str(text: str, width: struct.Struct) -> bytes:
    raw = text.encode("utf-8")
    limit = (1 << (8 * width.size)) - 1
    if len(raw) > limit:
        raise CodecError(f"string of {len(raw)} bytes exceeds {limit}")
    return width.pack(len(raw)) + raw


class StoredFields(Protocol):
    """What a PULL_MESSAGE answer carries of a stored message (the store's
    ``StoredMessage`` has these fields)."""

    topic: str
    queue_id: int
    queue_offset: int
    commitlog_offset: int
    body: bytes
    tags: str | None
    keys: list[str]
    properties: dict[str, str]
    msg_id: str
    offset_msg_id: str
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    flag: int
    sys_flag: int
    reconsume_times: int
    prepared_transaction_offset: int
    body_crc: int


def stored_properties(msg: StoredFields) -> dict[str, str]:
    props = dict(msg.properties)
    if msg.tags:
        props[PROPERTY_TAGS] = msg.tags
    if msg.keys:
        props[PROPERTY_KEYS] = KEY_SEPARATOR.join(msg.keys)
    return props


def encode_pulled(messages: Sequence[StoredFields]) -> bytes:
    out = bytearray()
    for m in messages:
        crc = m.body_crc or crc32(m.body) & 0xFFFFFFFF
        head = _PULL_HEAD.pack(
            0,
            PULL_MAGIC,
            crc,
            m.queue_id,
            m.flag,
            m.queue_offset,
            m.commitlog_offset,
            m.sys_flag,
            m.born_timestamp,
        )
        props = properties_bytes(stored_properties(m))
        entry = b"".join(
            [
                head,
                _short_str(m.born_host, _U8),
                _I64.pack(m.store_timestamp),
                _short_str(m.store_host, _U8),
                _PULL_TAIL.pack(m.reconsume_times, m.prepared_transaction_offset, len(m.body)),
                m.body,
                _short_str(m.topic, _U16),
                _U16.pack(len(props)),
                props,
                _short_str(m.msg_id, _U8),
                _short_str(m.offset_msg_id, _U8),
            ]
        )
        out += _U32.pack(len(entry)) + entry[4:]
    return bytes(out)


class _Reader:
    def __init__(self, data: memoryview, pos: int, end: int) -> None:
        self.data, self.pos, self.end = data, pos, end

    def take(self, n: int) -> memoryview:
        if self.pos + n > self.end:
            raise CodecError(f"pulled message truncated at byte {self.pos}")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, st: struct.Struct) -> tuple[int, ...]:
        return st.unpack(self.take(st.size))

    def string(self, width: struct.Struct) -> str:
        (n,) = self.unpack(width)
        try:
            return bytes(self.take(n)).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CodecError(f"string at byte {self.pos} is not UTF-8") from exc


def decode_pulled(data: bytes) -> list[PulledMessage]:
    view = memoryview(data)
    out: list[PulledMessage] = []
    pos = 0
    while pos < len(view):
        if len(view) - pos < 4:
            raise CodecError(f"truncated pulled message at byte {pos}")
        (total,) = _U32.unpack_from(view, pos)
        if total < _PULL_HEAD.size or pos + total > len(view):
            raise CodecError(f"pulled message at byte {pos} has bad totalSize {total}")
        r = _Reader(view, pos, pos + total)
        (_, magic, crc, qid, flag, qoff, coff, sysflag, born_ts) = r.unpack(_PULL_HEAD)
        if magic != PULL_MAGIC:
            raise CodecError(f"pulled message at byte {pos} has bad magic {magic:#x}")
        born_host = r.string(_U8)
        (store_ts,) = r.unpack(_I64)
        store_host = r.string(_U8)
        reconsume, prepared, body_len = r.unpack(_PULL_TAIL)
        body = bytes(r.take(body_len))
        topic = r.string(_U16)
        wire = WireMessage.from_properties(body, decode_properties(r.string(_U16)), flag)
        msg_id = r.string(_U8)
        offset_msg_id = r.string(_U8)
        out.append(
            PulledMessage(
                topic=topic,
                queue_id=qid,
                queue_offset=qoff,
                commitlog_offset=coff,
                body=body,
                tags=wire.tags,
                keys=wire.keys,
                properties=wire.properties,
                msg_id=msg_id,
                offset_msg_id=offset_msg_id,
                born_timestamp=born_ts,
                store_timestamp=store_ts,
                born_host=born_host,
                store_host=store_host,
                flag=flag,
                sys_flag=sysflag,
                reconsume_times=reconsume,
                prepared_transaction_offset=prepared,
                body_crc=crc,
            )
        )
        pos += total
    return out
