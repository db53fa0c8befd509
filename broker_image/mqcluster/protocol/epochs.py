"""Epoch entries of controller mode (RIP-44): ``<MasterEpoch, startOffset>`` per master
term, as the epoch file, GET_BROKER_EPOCH_CACHE and the operator's checks hold them.

The end offset of an entry is the start offset of the next one; the last entry's end is
open (``OPEN_END``) until the caller closes it with the commitlog's max offset. The
epoch file's text layout (``encode``/``decode``, with a CRC so a torn write is never
mistaken for data) is in docs/formats.md, "Epoch file".
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

VERSION = "0"
OPEN_END = (1 << 63) - 1


@dataclass(frozen=True)
class EpochEntry:
    epoch: int
    start_offset: int
    end_offset: int = OPEN_END

    def contains(self, offset: int) -> bool:
        return self.start_offset <= offset < self.end_offset

    def to_json(self) -> dict[str, Any]:
        """RocketMQ's EpochEntry JSON (GET_BROKER_EPOCH_CACHE's ``epochList``)."""
        return {"epoch": self.epoch, "startOffset": self.start_offset, "endOffset": self.end_offset}


class EpochFileError(ValueError):
    pass


def encode(entries: list[EpochEntry]) -> bytes:
    lines = "".join(f"{e.epoch} {e.start_offset}\n" for e in entries)
    return f"{VERSION}\n{len(entries)}\n{zlib.crc32(lines.encode()):08x}\n{lines}".encode()


def decode(raw: bytes) -> list[tuple[int, int]]:
    text = raw.decode("utf-8")
    head = text.split("\n", 3)
    if len(head) < 4 or head[0] != VERSION:
        raise EpochFileError("bad epoch file header")
    count, crc, body = int(head[1]), int(head[2], 16), head[3]
    if zlib.crc32(body.encode()) != crc:
        raise EpochFileError("epoch file checksum mismatch")
    pairs = [tuple(int(x) for x in line.split()) for line in body.splitlines() if line]
    if len(pairs) != count or any(len(p) != 2 for p in pairs):
        raise EpochFileError("epoch file entry count mismatch")
    return [(p[0], p[1]) for p in pairs]
