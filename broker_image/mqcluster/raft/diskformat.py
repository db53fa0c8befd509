"""Byte layouts of the small durable files: hard state and snapshot.

Both start with a 4-byte magic and a CRC32 of everything after the CRC, so a
damaged file is reported instead of being trusted. They are replaced
atomically (see ``storage.write_atomic``), so there is no torn-write case.

    hardstate: b"MQHS" crc(4) json{"term", "votedFor"}
    snapshot:  b"MQSN" crc(4) meta_len(4) json{"index", "term", "voters", "learners"} data
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

from mqcluster.raft.types import HardState, Membership, Snapshot, SnapshotMeta

_HS_MAGIC = b"MQHS"
_SNAP_MAGIC = b"MQSN"
_U32 = struct.Struct(">I")


class CorruptFileError(Exception):
    """A hard-state or snapshot file failed its checks."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"corrupt file {path}: {reason}")
        self.path = path


def _seal(magic: bytes, payload: bytes) -> bytes:
    return magic + _U32.pack(zlib.crc32(payload)) + payload


def _open(magic: bytes, raw: bytes, path: Path) -> bytes:
    if len(raw) < 8 or raw[:4] != magic:
        raise CorruptFileError(path, f"bad magic or size ({len(raw)} bytes)")
    payload = raw[8:]
    if zlib.crc32(payload) != _U32.unpack_from(raw, 4)[0]:
        raise CorruptFileError(path, "CRC mismatch")
    return payload


def encode_hard_state(hs: HardState) -> bytes:
    body = json.dumps({"term": hs.term, "votedFor": hs.voted_for}).encode()
    return _seal(_HS_MAGIC, body)


def decode_hard_state(raw: bytes, path: Path) -> HardState:
    doc = json.loads(_open(_HS_MAGIC, raw, path))
    voted = doc["votedFor"]
    return HardState(term=int(doc["term"]), voted_for=None if voted is None else str(voted))


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
    doc = json.loads(raw)
    return SnapshotMeta(
        index=int(doc["index"]),
        term=int(doc["term"]),
        membership=Membership(
            voters=[str(v) for v in doc["voters"]], learners=[str(v) for v in doc["learners"]]
        ),
    )


def encode_snapshot(snap: Snapshot) -> bytes:
    meta = encode_snapshot_meta(snap.meta)
    return _seal(_SNAP_MAGIC, _U32.pack(len(meta)) + meta + snap.data)


def decode_snapshot(raw: bytes, path: Path) -> Snapshot:
    payload = _open(_SNAP_MAGIC, raw, path)
    (meta_len,) = _U32.unpack_from(payload, 0)
    if 4 + meta_len > len(payload):
        raise CorruptFileError(path, f"metadata length {meta_len} exceeds file")
    meta = decode_snapshot_meta(payload[4 : 4 + meta_len])
    return Snapshot(meta=meta, data=payload[4 + meta_len :])
