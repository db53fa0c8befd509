"""The ``checkpoint`` file: how far the commitlog and consume queues are known to be on disk.

Its layout: docs/formats.md, "Checkpoint"."""

from __future__ import annotations

import logging
import struct
import zlib
from dataclasses import astuple, dataclass

from mqcluster.common.files import atomic_write, read_file
from mqcluster.store.errors import StoreLayoutError

log = logging.getLogger(__name__)

LAYOUT = struct.Struct(">qqqqqqq")
CRC = struct.Struct(">I")
SIZE = LAYOUT.size + CRC.size


@dataclass
class Checkpoint:
    """Timestamps are store timestamps (ms) of the last message flushed; offsets are global.

    ``physic_offset``: the commitlog is fsynced below it. ``logics_offset``: every message
    below it is in the consume queues, and those were fsynced.
    """

    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    master_flushed_offset: int = 0
    confirm_phy_offset: int = 0
    physic_offset: int = 0
    logics_offset: int = 0

    def encode(self) -> bytes:
        body = LAYOUT.pack(*astuple(self))
        return body + CRC.pack(zlib.crc32(body))

    @classmethod
    def decode(cls, raw: bytes) -> Checkpoint | None:
        if len(raw) < LAYOUT.size + CRC.size:
            return None
        body = raw[:LAYOUT.size]
        (crc,) = CRC.unpack_from(raw, LAYOUT.size)
        if zlib.crc32(body) != crc:
            return None
        return cls(*LAYOUT.unpack(body))


def load_checkpoint(path: str) -> Checkpoint | None:
    """The checkpoint; None when there is none or its checksum fails (then recovery scans
    every segment). A file of the wrong length was not written whole by a store (its
    writes replace it atomically): that stops the store, naming it."""
    raw = read_file(path)
    if raw is None:
        return None
    if len(raw) != SIZE:
        raise StoreLayoutError(
            f"{path}: {len(raw)} bytes, a checkpoint is {SIZE}: it is not one this store "
            "wrote whole; remove it and the store recovers by scanning every segment")
    cp = Checkpoint.decode(raw)
    if cp is None:
        log.error("checkpoint file %s is damaged; recovering from the first segment", path)
    return cp


def save_checkpoint(path: str, cp: Checkpoint) -> None:
    atomic_write(path, cp.encode())
