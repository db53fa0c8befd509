"""Byte layouts of the durable files: log records, hard state and snapshot.

The layouts: docs/formats.md, "Raft log on disk". A log record is the same bytes in a
segment file and in the body of an AppendRequest, so a batch is encoded once and a
follower writes what it received (after checking each record's CRC). The hard state and
the snapshot start with a magic and a CRC, so a damaged file is reported instead of being
trusted; they are replaced atomically (``mqcluster.common.files.atomic_write``), so there
is no torn-write case.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from pathlib import Path

from mqcluster.common.crc import crc32
from mqcluster.raft.limits import LimitError, check_id, check_long
from mqcluster.raft.types import Entry, HardState, Membership, Snapshot, SnapshotMeta

_HS_MAGIC = b"MQHS"
_SNAP_MAGIC = b"MQSN"
_U32 = struct.Struct(">I")
RECORD = struct.Struct(">IIQQB")  # length, crc32, index, term, type
RECORD_HEAD = RECORD.size  # 25
RECORD_FIXED = RECORD_HEAD - 8  # index+term+type, counted in ``length``
_IDX_TERM_TYPE = struct.Struct(">QQB")
_LEN_CRC = struct.Struct(">II")


def encode_records(entries: Sequence[Entry]) -> tuple[bytes, list[int]]:
    """The records of ``entries`` back to back, and the offset of each (plus the end)."""
    parts: list[bytes] = []
    offsets: list[int] = []
    pos = 0
    pack_head, pack_len_crc = _IDX_TERM_TYPE.pack, _LEN_CRC.pack
    for e in entries:
        head = pack_head(e.index, e.term, e.type)
        data = e.data
        length = RECORD_FIXED + len(data)
        parts += (pack_len_crc(length, crc32(data, crc32(head))), head, data)
        offsets.append(pos)
        pos += 8 + length
    offsets.append(pos)
    return b"".join(parts), offsets


class RaftStoreError(Exception):
    """A Raft store file cannot be used as it is; the message is one line naming it.

    A member must not start from it: the program stops with that line."""


class CorruptFileError(RaftStoreError):
    """A hard-state or snapshot file failed its checks."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"corrupt file {path}: {reason}")
        self.path = path


def _seal(magic: bytes, payload: bytes) -> bytes:
    return magic + _U32.pack(crc32(payload)) + payload


def _open(magic: bytes, raw: bytes, path: Path) -> bytes:
    if len(raw) < 8 or raw[:4] != magic:
        raise CorruptFileError(path, f"bad magic or size ({len(raw)} bytes)")
    payload = raw[8:]
    if crc32(payload) != _U32.unpack_from(raw, 4)[0]:
        raise CorruptFileError(path, "CRC mismatch")
    return payload


def encode_hard_state(hs: HardState) -> bytes:
    body = json.dumps({"term": hs.term, "votedFor": hs.voted_for}).encode()
    return _seal(_HS_MAGIC, body)


def decode_hard_state(raw: bytes, path: Path) -> HardState:
    """The term and vote of a hardstate file; CorruptFileError naming the file if it is
    damaged or holds what no member could have reached (an older version saved any
    term a peer sent, 2**64 included)."""
    try:
        doc = json.loads(_open(_HS_MAGIC, raw, path))
        if not isinstance(doc, dict):
            raise LimitError("not a JSON object")
        term = check_long(doc["term"], "term")
        voted = doc["votedFor"]
        return HardState(term=term, voted_for=None if voted is None else check_id(voted,
                                                                                  "votedFor"))
    except CorruptFileError:
        raise
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise CorruptFileError(path, f"{exc}") from None


def encode_snapshot_meta(meta: SnapshotMeta) -> bytes:
    return json.dumps(
        {
            "index": meta.index,
            "term": meta.term,
            "voters": meta.membership.voters,
            "learners": meta.membership.learners,
        }
    ).encode()


def decode_snapshot_meta(raw: bytes) -> SnapshotMeta:
    """Raises ValueError (LimitError for a value out of range), KeyError or TypeError."""
    doc = json.loads(raw)
    if not isinstance(doc, dict):
        raise LimitError("snapshot metadata is not a JSON object")
    voters, learners = doc["voters"], doc["learners"]
    if not isinstance(voters, list) or not isinstance(learners, list) or not voters:
        raise LimitError("snapshot voters and learners must be lists, with a voter")
    return SnapshotMeta(
        index=check_long(doc["index"], "snapshot index"),
        term=check_long(doc["term"], "snapshot term"),
        membership=Membership(
            voters=[check_id(v, "snapshot voter") for v in voters],
            learners=[check_id(v, "snapshot learner") for v in learners],
        ),
    )


def encode_snapshot(snap: Snapshot) -> bytes:
    meta = encode_snapshot_meta(snap.meta)
    return _seal(_SNAP_MAGIC, _U32.pack(len(meta)) + meta + snap.data)


def decode_snapshot(raw: bytes, path: Path) -> Snapshot:
    payload = _open(_SNAP_MAGIC, raw, path)
    if len(payload) < 4:
        raise CorruptFileError(path, "no metadata length")
    (meta_len,) = _U32.unpack_from(payload, 0)
    if 4 + meta_len > len(payload):
        raise CorruptFileError(path, f"metadata length {meta_len} exceeds file")
    try:
        meta = decode_snapshot_meta(payload[4 : 4 + meta_len])
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise CorruptFileError(path, f"bad metadata: {exc}") from None
    return Snapshot(meta=meta, data=payload[4 + meta_len :])
