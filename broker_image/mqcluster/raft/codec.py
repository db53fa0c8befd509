"""Raft messages <-> RemotingCommand frames.

Every message type has its own request code in 2001-2009 and travels as a
one-way request (Raft answers are messages of their own). Scalar fields go in
``extFields`` as strings; log entries and snapshots go in the body as packed
binary, so a batch of 1 KiB entries costs one copy, not a JSON/base64 pass:

    entries:  repeated  index(8) term(8) type(1) length(4) data
    snapshot: meta_length(4) meta(JSON) data

Field lists come from the message dataclasses themselves, so a field added to
a message in ``types.py`` is carried without touching this module (the
round-trip tests catch a field of a type this codec cannot carry).
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from mqcluster.raft.codes import RaftRequestCode
from mqcluster.raft.diskformat import decode_snapshot_meta, encode_snapshot_meta
from mqcluster.raft.types import (
    AppendRequest,
    AppendResponse,
    Entry,
    EntryType,
    HeartbeatRequest,
    HeartbeatResponse,
    InstallSnapshotRequest,
    InstallSnapshotResponse,
    Message,
    Snapshot,
    TimeoutNowRequest,
    VoteRequest,
    VoteResponse,
)
from mqcluster.wire.frame import FLAG_ONEWAY, FrameError, RemotingCommand

_ENTRY = struct.Struct(">QQBI")
_U32 = struct.Struct(">I")
_ENTRY_TYPES = {int(t): t for t in EntryType}

MESSAGE_CODES: dict[type[Any], int] = {
    VoteRequest: RaftRequestCode.VOTE_REQUEST,
    VoteResponse: RaftRequestCode.VOTE_RESPONSE,
    HeartbeatRequest: RaftRequestCode.HEARTBEAT_REQUEST,
    HeartbeatResponse: RaftRequestCode.HEARTBEAT_RESPONSE,
    AppendRequest: RaftRequestCode.APPEND_REQUEST,
    AppendResponse: RaftRequestCode.APPEND_RESPONSE,
    InstallSnapshotRequest: RaftRequestCode.INSTALL_SNAPSHOT_REQUEST,
    InstallSnapshotResponse: RaftRequestCode.INSTALL_SNAPSHOT_RESPONSE,
    TimeoutNowRequest: RaftRequestCode.TIMEOUT_NOW_REQUEST,
}

Converter = Callable[[str], Any]


@dataclass(frozen=True)
class _Spec:
    cls: type[Any]
    code: int
    scalars: tuple[tuple[str, Converter], ...]
    optional: frozenset[str]  # absent from extFields means None
    body_field: str | None  # "entries" or "snapshot"


def _converter(name: str, hint: Any) -> tuple[Converter, bool] | None:
    """(str -> value, is optional) for a scalar annotation; None for a body field."""
    optional = False
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"field {name}: cannot encode union {hint}")
        hint, optional = args[0], True
    if hint is int:
        return int, optional
    if hint is str:
        return str, optional
    if hint is float:
        return float, optional
    if hint is bool:
        return (lambda s: s == "True"), optional
    if isinstance(hint, type) and issubclass(hint, IntEnum):
        enum_cls = hint
        return (lambda s: enum_cls(int(s))), optional
    return None


def _build_spec(cls: type[Any], code: int) -> _Spec:
    hints = typing.get_type_hints(cls)
    scalars: list[tuple[str, Converter]] = []
    optional: set[str] = set()
    body_field: str | None = None
    for f in dataclasses.fields(cls):
        conv = _converter(f.name, hints[f.name])
        if conv is not None:
            scalars.append((f.name, conv[0]))
            if conv[1]:
                optional.add(f.name)
            continue
        if hints[f.name] in (list[Entry], Snapshot) and body_field is None:
            body_field = f.name
            continue
        raise TypeError(f"{cls.__name__}.{f.name}: cannot encode {hints[f.name]!r}")
    return _Spec(cls, code, tuple(scalars), frozenset(optional), body_field)


_SPECS: dict[type[Any], _Spec] = {
    cls: _build_spec(cls, code) for cls, code in MESSAGE_CODES.items()
}
_BY_CODE: dict[int, _Spec] = {spec.code: spec for spec in _SPECS.values()}
RAFT_MESSAGE_CODES: frozenset[int] = frozenset(_BY_CODE)


# --- entries and snapshots -----------------------------------------------------------------


def encode_entries(entries: Sequence[Entry]) -> bytes:
    pack = _ENTRY.pack
    parts: list[bytes] = []
    for e in entries:
        parts.append(pack(e.index, e.term, e.type, len(e.data)))
        parts.append(e.data)
    return b"".join(parts)


def decode_entries(body: bytes) -> list[Entry]:
    out: list[Entry] = []
    unpack = _ENTRY.unpack_from
    head = _ENTRY.size
    pos, end = 0, len(body)
    types_ = _ENTRY_TYPES
    try:
        while pos < end:
            index, term, typ, length = unpack(body, pos)
            start = pos + head
            pos = start + length
            if pos > end:
                raise FrameError(f"entry {index} runs past the end of the body")
            out.append(Entry(index, term, types_[typ], body[start:pos]))
    except struct.error as exc:
        raise FrameError(f"truncated entry header at body offset {pos}") from exc
    except KeyError as exc:
        raise FrameError(f"unknown entry type {exc.args[0]}") from exc
    return out


def encode_snapshot_body(snap: Snapshot) -> bytes:
    meta = encode_snapshot_meta(snap.meta)
    return _U32.pack(len(meta)) + meta + snap.data


def decode_snapshot_body(body: bytes) -> Snapshot:
    if len(body) < 4:
        raise FrameError("snapshot body shorter than its length field")
    (meta_len,) = _U32.unpack_from(body, 0)
    if 4 + meta_len > len(body):
        raise FrameError(f"snapshot metadata length {meta_len} exceeds the body")
    try:
        meta = decode_snapshot_meta(body[4 : 4 + meta_len])
    except (ValueError, KeyError, TypeError) as exc:
        raise FrameError(f"bad snapshot metadata: {exc!r}") from exc
    return Snapshot(meta=meta, data=body[4 + meta_len :])


# --- messages ----------------------------------------------------------------------------


class EntriesBodyCache:
    """Encodes each batch of entries once although it goes to several followers.

    Keyed by (first index, last index, last term): by the log matching property
    an entry's (index, term) fixes every entry before it, so equal keys mean
    equal batches. Use one cache per Raft group."""

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        self._bodies: dict[tuple[int, int, int], bytes] = {}

    def body(self, entries: Sequence[Entry]) -> bytes:
        if not entries:
            return b""
        last = entries[-1]
        key = (entries[0].index, last.index, last.term)
        body = self._bodies.get(key)
        if body is None:
            if len(self._bodies) >= self.capacity:
                self._bodies.clear()
            body = self._bodies[key] = encode_entries(entries)
        return body


def encode_message(msg: Message, cache: EntriesBodyCache | None = None) -> RemotingCommand:
    spec = _SPECS[type(msg)]
    ext: dict[str, str] = {}
    for name, _conv in spec.scalars:
        value = getattr(msg, name)
        if value is not None:
            ext[name] = str(int(value)) if isinstance(value, IntEnum) else str(value)
    body = b""
    if spec.body_field == "entries":
        entries = getattr(msg, "entries")  # noqa: B009
        body = cache.body(entries) if cache is not None else encode_entries(entries)
    elif spec.body_field is not None:
        body = encode_snapshot_body(getattr(msg, spec.body_field))
    return RemotingCommand(code=spec.code, flag=FLAG_ONEWAY, ext_fields=ext, body=body)


def decode_message(cmd: RemotingCommand) -> Message:
    """The message a frame carries; FrameError if it is not a valid Raft message."""
    spec = _BY_CODE.get(cmd.code)
    if spec is None:
        raise FrameError(f"request code {cmd.code} is not a raft message")
    ext = cmd.ext_fields
    kwargs: dict[str, Any] = {}
    try:
        for name, conv in spec.scalars:
            raw = ext.get(name)
            if raw is None:
                if name in spec.optional:
                    kwargs[name] = None
                    continue
                raise FrameError(f"{spec.cls.__name__}: missing field {name!r}")
            kwargs[name] = conv(raw)
    except ValueError as exc:
        raise FrameError(f"{spec.cls.__name__}: bad field value: {exc}") from exc
    if spec.body_field == "entries":
        kwargs["entries"] = decode_entries(cmd.body)
    elif spec.body_field is not None:
        kwargs[spec.body_field] = decode_snapshot_body(cmd.body)
    msg: Message = spec.cls(**kwargs)
    return msg


# --- client payloads: a batch of opaque values ---------------------------------------------


def pack_values(values: Iterable[bytes]) -> bytes:
    parts: list[bytes] = []
    for v in values:
        parts.append(_U32.pack(len(v)))
        parts.append(v)
    return b"".join(parts)


def unpack_values(body: bytes) -> list[bytes]:
    out: list[bytes] = []
    pos, end = 0, len(body)
    while pos < end:
        if end - pos < 4:
            raise FrameError(f"truncated value length at body offset {pos}")
        (length,) = _U32.unpack_from(body, pos)
        pos += 4
        if pos + length > end:
            raise FrameError(f"value at body offset {pos} runs past the end")
        out.append(body[pos : pos + length])
        pos += length
    return out
