"""What recovery does with the bytes after a damaged commitlog record: counts, keeps them.

Recovery must cut the commitlog at the first record it cannot read (what follows has
no consistent queue offsets), but it never destroys what it cuts: the bytes from there
to the end of the written data are copied to ``commitlog.damaged/<offset>-<time>``
(one file per segment they come from) before the commitlog is cut, and counted:
intact records are found again past the damage by their own header (magic, the
physical offset field naming their own position, CRC), so the report says how many
records this replica lost and where.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mqcluster.common.files import fsync_dir
from mqcluster.store.codec import MESSAGE_MAGIC, PREFIX, RecordKind, check
from mqcluster.store.layout import segment_name

_MAGIC = struct.pack(">i", MESSAGE_MAGIC)
_TRIM_CHUNK = 4 * 1024 * 1024
_ZEROS = bytes(_TRIM_CHUNK)


def data_extent(fd: int, start: int, limit: int) -> tuple[int, int]:
    """``(allocated end, non-zero end)`` of the file in ``[start, limit)``: where its last
    data region ends and where its last non-zero byte ends (``start`` when none).

    Segments are sparse: holes are skipped without reading them (SEEK_DATA/SEEK_HOLE),
    then trailing zeros of the last data region are trimmed. (A record may end in zero
    bytes: ``survey`` finds where the last one really ends.)"""
    limit = min(limit, os.fstat(fd).st_size)
    end, pos = start, start
    while pos < limit:
        try:
            data = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
            break
        if data >= limit:
            break
        pos = min(os.lseek(fd, data, os.SEEK_HOLE), limit)
        end = pos
    allocated = end
    while end > start:
        lo = max(start, end - _TRIM_CHUNK)
        chunk = os.pread(fd, end - lo, lo)
        if chunk != _ZEROS[:len(chunk)]:  # (a memcmp: most chunks are all zeros)
            return allocated, lo + len(chunk.rstrip(b"\0"))
        end = lo
    return allocated, start


@dataclass
class Survey:
    """Records found in bytes that recovery cuts off."""

    intact: int = 0
    damaged: list[tuple[int, int]] = field(default_factory=list)
    """``[start, end)`` commitlog offsets of the unreadable regions."""
    exact: bool = True
    """Each damaged region is one record whose length field is intact; else it may
    have held more records than counted (one each)."""

    @property
    def records_lost(self) -> int:
        return self.intact + len(self.damaged)


def survey(buf: mmap.mmap, lo: int, nonzero_end: int, seg_start: int, seg_size: int,
           max_size: int, into: Survey) -> int:
    """Count the records of one segment's bytes ``buf[lo:]`` (``buf`` maps the segment
    from its start; nothing but zeros lies past ``nonzero_end``); returns where the
    last of them ends. Unreadable regions end where the next intact record begins."""
    end = lo
    with memoryview(buf) as view:
        i, n = lo, len(buf)
        while i < n:
            c = check(view, i, seg_start + i, True, max_size)
            if c.kind is RecordKind.MESSAGE:
                into.intact += 1
                i += c.size
                end = i
                continue
            if i >= nonzero_end or (c.kind is RecordKind.BLANK and i + c.size == seg_size):
                break
            j = _next_record(buf, view, i + 1, seg_start, max_size)
            if j >= n:
                j = n
                if not view[i:nonzero_end].tobytes().strip(b"\0"):
                    break  # only zeros follow: the end of what was written
            # (Zeros followed by a record are lost records: they are written contiguously.)
            into.damaged.append((seg_start + i, seg_start + min(j, nonzero_end)))
            if n - i < PREFIX.size or PREFIX.unpack_from(view, i)[0] != j - i:
                into.exact = False
            i = j
            end = min(j, nonzero_end)
    return max(end, nonzero_end)


def _next_record(buf: mmap.mmap, view: memoryview, start: int, base: int,
                 max_size: int) -> int:
    """Position of the first intact message record at or after ``start`` (or the end)."""
    k = buf.find(_MAGIC, start + 4)
    while k >= 0:
        at = k - 4
        if check(view, at, base + at, True, max_size).kind is RecordKind.MESSAGE:
            return at
        k = buf.find(_MAGIC, k + 1)
    return len(buf)


class DamageArchive:
    """Files the bytes recovery cuts off: ``<directory>/<offset>-<UTC time>``."""

    def __init__(self, directory: str, clock: Callable[[], float] = time.time) -> None:
        self.directory = directory
        self._clock = clock

    def save(self, offset: int, fd: int, pos: int, length: int, stamp: str) -> str:
        """Copy ``length`` bytes at ``pos`` of the file open as ``fd`` (commitlog offset
        ``offset``) to a new file, fsynced; returns its path."""
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, f"{segment_name(offset)}-{stamp}")
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            done = 0
            while done < length:
                chunk = os.pread(fd, min(length - done, 4 * 1024 * 1024), pos + done)
                if not chunk:
                    break
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view):]
                done += len(chunk)
            os.fsync(out)
        finally:
            os.close(out)
        fsync_dir(self.directory)
        return path

    def stamp(self) -> str:
        return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(self._clock()))
