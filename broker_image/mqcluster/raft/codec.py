"""Raft messages <-> RemotingCommand frames.

Every message type has its own request code in 2001-2009 and travels as a
one-way request (Raft answers are messages of their own). Scalar fields go in
``extFields`` as strings; log entries and snapshots go in the body as packed
binary, so a batch of entries costs one copy, not a JSON/base64 pass (docs/formats.md,
"Raft messages": entries are log records exactly as on disk).

Every record's CRC is checked on receipt; ``EntriesBodyCache`` keeps the
checked (or freshly encoded) record bytes so the leader's disk write and its
pushes to every follower, and a follower's disk write, reuse them.

Field lists come from the message dataclasses themselves, so a field added to
a message in ``types.py`` is carried without touching this module (the
round-trip tests catch a field of a type this codec cannot carry).
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from mqcluster.common.crc import crc32
from mqcluster.raft.codes import RaftRequestCode
from mqcluster.raft.diskformat import (
    RECORD,
    RECORD_FIXED,
    RECORD_HEAD,
    decode_snapshot_meta,
    encode_records,
    encode_snapshot_meta,
)
from mqcluster.raft.limits import (
    MAX_LONG,
    MAX_TERM,
    LimitError,
    check_id,
    parse_bool,
    parse_finite_float,
    parse_long,
)
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

_MAX_RECORD = 256 * 1024 * 1024
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

Converter = Callable[[str, str], Any]  # (raw value, field name) -> value


@dataclass(frozen=True)
class _Spec:
    cls: type[Any]
    code: int
    scalars: tuple[tuple[str, Converter], ...]
    optional: frozenset[str]  # absent from extFields means None
    body_field: str | None  # "entries" or "snapshot"


def _enum_converter(enum_cls: type[IntEnum]) -> Converter:
    def convert(raw: str, what: str) -> Any:
        value = parse_long(raw, what)
        try:
            return enum_cls(value)
        except ValueError:
            raise LimitError(f"{what}: {value} is not a {enum_cls.__name__}") from None

    return convert


def _converter(name: str, hint: Any) -> tuple[Converter, bool] | None:
    """(str -> checked value, is optional) for a scalar annotation; None for a body field.

    Every int of a Raft message is a term, an index, a counter or a sequence number:
    a non-negative Java ``long``. Every str is a member id."""
    optional = False
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"field {name}: cannot encode union {hint}")
        hint, optional = args[0], True
    if hint is int:
        return parse_long, optional
    if hint is str:
        return check_id, optional
    if hint is float:
        return parse_finite_float, optional
    if hint is bool:
        return parse_bool, optional
    if isinstance(hint, type) and issubclass(hint, IntEnum):
        return _enum_converter(hint), optional
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
    return encode_records(entries)[0]


def decode_records(body: bytes) -> tuple[list[Entry], list[int]]:
    """Entries of a body of log records, each CRC-checked, and the record offsets (+ end)."""
    out: list[Entry] = []
    offsets: list[int] = []
    unpack = RECORD.unpack_from
    types_ = _ENTRY_TYPES
    view = memoryview(body)
    pos, end = 0, len(body)
    while pos < end:
        if end - pos < RECORD_HEAD:
            raise FrameError(f"truncated entry header at body offset {pos}")
        length, crc, index, term, typ = unpack(body, pos)
        if length < RECORD_FIXED or length > _MAX_RECORD:
            raise FrameError(f"entry record length {length} out of range at body offset {pos}")
        if index > MAX_LONG or term > MAX_TERM:
            raise FrameError(f"entry at body offset {pos}: index {index} or term {term} "
                             f"past {MAX_LONG}")
        stop = pos + 8 + length
        if stop > end:
            raise FrameError(f"entry {index} runs past the end of the body")
        if crc32(view[pos + 8 : stop]) != crc:
            raise FrameError(f"entry {index}: CRC mismatch at body offset {pos}")
        kind = types_.get(typ)
        if kind is None:
            raise FrameError(f"unknown entry type {typ}")
        out.append(Entry(index, term, kind, body[pos + RECORD_HEAD : stop]))
        offsets.append(pos)
        pos = stop
    offsets.append(pos)
    return out, offsets


def decode_entries(body: bytes) -> list[Entry]:
    return decode_records(body)[0]


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
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise FrameError(f"bad snapshot metadata: {exc}") from None
    return Snapshot(meta=meta, data=body[4 + meta_len :])


# --- messages ----------------------------------------------------------------------------


@dataclass(slots=True)
class _Run:
    first_index: int
    terms: list[int]  # of each entry, from ``first_index`` on
    body: bytes
    offsets: list[int]  # of each record in ``body``, plus the end


class EntriesBodyCache:
    """The log records of recent entries, found by (index, term).

    A batch's records are encoded once (or, on a follower, CRC-checked once as
    received) and reused: for the pushes of the same batch to every follower and
    for this member's own disk write. An (index, term) pair names one entry for
    the whole group (only that term's leader creates it), so a hit is always the
    bytes of that very entry. The cache holds no Entry objects, only ints and
    bytes, which the cyclic garbage collector does not have to walk.
    Use one cache per Raft group, from one thread."""

    def __init__(self, capacity_bytes: int = 32 * 1024 * 1024) -> None:
        self.capacity_bytes = capacity_bytes
        self._runs: deque[_Run] = deque()
        self._by_index: dict[int, _Run] = {}
        self._bytes = 0

    def add(self, entries: Sequence[Entry], body: bytes, offsets: list[int]) -> None:
        """Remember ``body`` as the records of ``entries`` (``offsets`` as decode_records).

        ``entries`` must have consecutive indexes, as a Raft batch does."""
        if not entries:
            return
        first = entries[0].index
        run = _Run(first, [e.term for e in entries], body, offsets)
        by_index = self._by_index
        for index in range(first, first + len(entries)):
            by_index[index] = run
        self._runs.append(run)
        self._bytes += len(body)
        while self._bytes > self.capacity_bytes and len(self._runs) > 1:
            old = self._runs.popleft()
            self._bytes -= len(old.body)
            for index in range(old.first_index, old.first_index + len(old.terms)):
                if by_index.get(index) is old:
                    del by_index[index]

    def _cached(self, entry: Entry) -> _Run | None:
        run = self._by_index.get(entry.index)
        if run is None or run.terms[entry.index - run.first_index] != entry.term:
            return None
        return run

    def body(self, entries: Sequence[Entry]) -> bytes:
        """The records of ``entries``, from cached buffers where possible."""
        n = len(entries)
        if not n:
            return b""
        parts: list[bytes | memoryview] = []
        i = 0
        while i < n:
            run = self._cached(entries[i])
            if run is None:
                j = i + 1
                while j < n and self._cached(entries[j]) is None:
                    j += 1
                batch = list(entries[i:j])
                body, offsets = encode_records(batch)
                if _consecutive(batch):
                    self.add(batch, body, offsets)
                parts.append(body)
                i = j
                continue
            terms = run.terms
            k = first_k = entries[i].index - run.first_index
            i += 1
            k += 1
            limit = len(terms)
            while (
                i < n
                and k < limit
                and entries[i].index == run.first_index + k
                and entries[i].term == terms[k]
            ):
                i += 1
                k += 1
            if first_k == 0 and k == limit:
                parts.append(run.body)
            else:
                parts.append(memoryview(run.body)[run.offsets[first_k] : run.offsets[k]])
        if len(parts) == 1 and isinstance(parts[0], bytes):
            return parts[0]
        return b"".join(parts)


def _consecutive(entries: Sequence[Entry]) -> bool:
    first = entries[0].index
    return all(e.index == first + i for i, e in enumerate(entries))


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


def decode_message(cmd: RemotingCommand, cache: EntriesBodyCache | None = None) -> Message:
    """The message a frame carries; FrameError if it is not a valid Raft message.

    With ``cache``, the checked records of an AppendRequest are kept there."""
    spec = _BY_CODE.get(cmd.code)
    if spec is None:
        raise FrameError(f"request code {cmd.code} is not a raft message")
    ext = cmd.ext_fields
    kwargs: dict[str, Any] = {}
    name = spec.cls.__name__
    try:
        for field_name, conv in spec.scalars:
            raw = ext.get(field_name)
            if raw is None:
                if field_name in spec.optional:
                    kwargs[field_name] = None
                    continue
                raise FrameError(f"{name}: missing field {field_name!r}")
            if type(raw) is not str:
                raise FrameError(f"{name}: field {field_name!r} is not a string")
            kwargs[field_name] = conv(raw, field_name)
    except LimitError as exc:
        raise FrameError(f"{name}: {exc}") from None
    if spec.body_field == "entries":
        entries, offsets = decode_records(cmd.body)
        _check_batch(kwargs, entries)  # (so the entries are consecutive)
        if cache is not None and entries:
            cache.add(entries, cmd.body, offsets)
        kwargs["entries"] = entries
    elif spec.body_field is not None:
        snap = decode_snapshot_body(cmd.body)
        if snap.meta.term > kwargs["term"]:
            raise FrameError(f"{name}: snapshot term {snap.meta.term} is past the "
                             f"request's term {kwargs['term']}")
        kwargs[spec.body_field] = snap
    msg: Message = spec.cls(**kwargs)
    return msg


def _check_batch(fields: dict[str, Any], entries: list[Entry]) -> None:
    """An AppendRequest's entries follow ``prev_index`` one by one, and their terms never
    go down from ``prev_term`` nor past the request's term (a leader's log, as Raft's
    Log Matching property has it)."""
    index, term = fields["prev_index"], fields["prev_term"]
    if term > fields["term"]:
        raise FrameError(f"AppendRequest: prev_term {term} is past the request's "
                         f"term {fields['term']}")
    for entry in entries:
        index += 1
        if entry.index != index:
            raise FrameError(f"AppendRequest: entry index {entry.index}, expected {index}")
        if not term <= entry.term <= fields["term"]:
            raise FrameError(f"AppendRequest: entry {entry.index} has term {entry.term}, "
                             f"outside {term}..{fields['term']}")
        term = entry.term


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
