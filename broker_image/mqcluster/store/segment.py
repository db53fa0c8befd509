"""Fixed-size segment files named by their starting offset (RocketMQ ``MappedFileQueue``).

Files are created at full size (sparse); ``write_pos`` is kept in memory and
recovered by the owner after a restart. Segment lookups and list changes are
guarded by a lock so the flusher thread can find segments while the event loop
rolls new ones.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Sequence

from mqcluster.common.files import fsync_dir, makedirs_durable
from mqcluster.store.layout import NAME_WIDTH, check_segments, list_segments, segment_name

log = logging.getLogger(__name__)

__all__ = ["NAME_WIDTH", "Segment", "SegmentError", "SegmentedFile", "segment_name"]


_IOV_MAX = min(os.sysconf("SC_IOV_MAX"), 1024)
"""Buffers per ``pwritev`` call."""


class SegmentError(RuntimeError):
    pass


class Segment:
    def __init__(self, path: str, start: int, size: int, create: bool) -> None:
        self.path = path
        self.start = start
        self.size = size
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        self.fd = os.open(path, flags, 0o644)
        if create:
            os.ftruncate(self.fd, size)
        # An existing file is opened as it is (``layout.check_segments`` vouched for its
        # size); a short last one regains its full size when recovery cuts it.
        self.write_pos = 0

    @property
    def end(self) -> int:
        """Global offset just past the last written byte."""
        return self.start + self.write_pos

    @property
    def limit(self) -> int:
        return self.start + self.size

    @property
    def full(self) -> bool:
        return self.write_pos >= self.size

    def write(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        while view:
            n = os.pwrite(self.fd, view, pos)
            pos += n
            view = view[n:]

    def append(self, data: bytes | bytearray | memoryview) -> None:
        if self.write_pos + len(data) > self.size:
            raise SegmentError(f"{self.path}: append past the end of the segment")
        self.write(self.write_pos, data)
        self.write_pos += len(data)

    def append_parts(self, parts: Sequence[bytes | bytearray | memoryview]) -> None:
        """Append the concatenation of ``parts`` with as few ``pwritev`` calls as it takes."""
        total = sum(map(len, parts))
        if self.write_pos + total > self.size:
            raise SegmentError(f"{self.path}: append past the end of the segment")
        pos = self.write_pos
        for i in range(0, len(parts), _IOV_MAX):
            chunk = parts[i : i + _IOV_MAX]
            want = sum(map(len, chunk))
            n = os.pwritev(self.fd, chunk, pos)
            if n < want:  # a short write: the rest the plain way
                self.write(pos + n, b"".join(chunk)[n:])
            pos += want
        self.write_pos = pos

    def read(self, pos: int, length: int) -> bytes:
        length = max(0, min(length, self.size - pos))
        return os.pread(self.fd, length, pos)

    def zero_from(self, pos: int) -> None:
        """Discard everything from ``pos`` on: shrink the file there and re-extend it."""
        os.ftruncate(self.fd, pos)
        os.ftruncate(self.fd, self.size)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def destroy(self) -> None:
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


class SegmentedFile:
    """An ordered, contiguous list of equally sized segments in one directory."""

    def __init__(self, directory: str, segment_size: int,
                 size_key: str = "segment size") -> None:
        self.directory = directory
        self.segment_size = segment_size
        self.size_key = size_key
        """The setting the size comes from, for the errors that name it."""
        self.size_recorded = False
        """The store's layout record vouches that the files were written with this size."""
        self.segments: list[Segment] = []
        self.lock = threading.RLock()

    def load(self) -> None:
        """Check the files (``layout.check_segments``: nothing is opened unless all pass),
        then open them; written positions start at full and are fixed by recovery."""
        makedirs_durable(self.directory)
        found = list_segments(self.directory)
        check_segments(self.directory, found, self.segment_size, self.size_key,
                       self.size_recorded)
        segments: list[Segment] = []
        try:
            for f in found:
                seg = Segment(f.path, f.start, self.segment_size, False)
                seg.write_pos = seg.size
                segments.append(seg)
        except BaseException:
            for s in segments:
                s.close()
            raise
        self.segments = segments

    @property
    def empty(self) -> bool:
        return not self.segments

    # Single reads of the list need no lock: CPython list operations are atomic.
    @property
    def min_offset(self) -> int:
        segs = self.segments
        return segs[0].start if segs else 0

    @property
    def max_offset(self) -> int:
        segs = self.segments
        return segs[-1].end if segs else 0

    @property
    def last(self) -> Segment | None:
        segs = self.segments
        return segs[-1] if segs else None

    def find(self, offset: int) -> Segment | None:
        with self.lock:
            if not self.segments:
                return None
            idx = (offset - self.segments[0].start) // self.segment_size
            if 0 <= idx < len(self.segments):
                return self.segments[idx]
            return None

    def between(self, start: int, end: int) -> list[Segment]:
        """Segments holding any byte of ``[start, end)``."""
        with self.lock:
            return [s for s in self.segments if s.start < end and s.limit > start]

    def create(self, start: int) -> Segment:
        with self.lock:
            if self.segments and start != self.segments[-1].limit:
                raise SegmentError(f"new segment at {start} does not follow the last one")
            makedirs_durable(self.directory)
            seg = Segment(os.path.join(self.directory, segment_name(start)), start,
                          self.segment_size, True)
            self.segments.append(seg)
        fsync_dir(self.directory)
        return seg

    def writable_segment(self, start_if_empty: int = 0) -> Segment:
        """The last segment, or a new one when there is none or it is full."""
        last = self.last
        if last is None:
            return self.create(start_if_empty - start_if_empty % self.segment_size)
        if last.full:
            return self.create(last.limit)
        return last

    def truncate(self, offset: int) -> None:
        """Drop everything at or after ``offset``."""
        with self.lock:
            keep = [s for s in self.segments if s.start <= offset]
            drop = [s for s in self.segments if s.start > offset]
            self.segments = keep
        for s in drop:
            log.warning("deleting segment %s beyond offset %d", s.path, offset)
            s.destroy()
        if keep:
            seg = keep[-1]
            seg.write_pos = min(offset - seg.start, seg.size)
            if seg.write_pos < seg.size:
                seg.zero_from(seg.write_pos)
        if drop:
            fsync_dir(self.directory)

    def delete_head(self, should_delete: Callable[[Segment], bool], max_count: int) -> int:
        """Delete leading segments while ``should_delete`` says so; never the last one."""
        deleted = 0
        while deleted < max_count:
            with self.lock:
                if len(self.segments) <= 1 or not should_delete(self.segments[0]):
                    break
                seg = self.segments.pop(0)
            log.info("deleting segment %s", seg.path)
            seg.destroy()
            deleted += 1
        if deleted:
            fsync_dir(self.directory)
        return deleted

    def close(self) -> None:
        with self.lock:
            for s in self.segments:
                s.close()
