"""Read a store's files without opening the store: for audit jobs and copies of live stores.

Nothing here writes, locks or recovers; a torn or corrupt tail simply ends the walk.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator

from mqcluster.store import codec
from mqcluster.store.codec import RecordKind
from mqcluster.store.consume_queue import UNIT, CqEntry
from mqcluster.store.message import StoredMessage
from mqcluster.store.segment import NAME_WIDTH


def _segment_files(directory: str) -> list[tuple[int, str]]:
    names = sorted(n for n in os.listdir(directory) if len(n) == NAME_WIDTH and n.isdigit())
    return [(int(n), os.path.join(directory, n)) for n in names]


def iter_messages(commitlog_dir: str, verify_crc: bool = True) -> Iterator[StoredMessage]:
    """Every message of the commitlog in ``commitlog_dir``, in commitlog order."""
    for start, path in _segment_files(commitlog_dir):
        with open(path, "rb") as f:
            data = f.read()
        pos = 0
        while pos < len(data):
            rec = codec.check(data, pos, start + pos, verify_crc, len(data))
            if rec.kind is RecordKind.MESSAGE:
                yield codec.decode(data, pos)
                pos += rec.size
            elif rec.kind is RecordKind.BLANK:
                break
            else:
                return


def iter_consume_queue(queue_dir: str) -> Iterator[CqEntry]:
    """Every written entry of one consume queue directory (``consumequeue/<topic>/<id>``)."""
    for start, path in _segment_files(queue_dir):
        with open(path, "rb") as f:
            data = f.read()
        for i in range(len(data) // UNIT.size):
            try:
                cl_offset, size, code = UNIT.unpack_from(data, i * UNIT.size)
            except struct.error:
                return
            if size <= 0:
                return
            yield CqEntry(start // UNIT.size + i, cl_offset, size, code)
