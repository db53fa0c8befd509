"""One consume queue: fixed 20-byte entries (docs/formats.md, "Consume queue entry").

Files live in ``consumequeue/<topic>/<queueId>/`` and are named by the byte offset of
their first entry, as RocketMQ does. Entry ``n`` sits at byte ``20 * n``. A queue whose
first message has a queue offset above zero (its older commitlog was deleted) starts
with blank entries, which are never returned.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from mqcluster.store.config import CQ_UNIT_SIZE
from mqcluster.store.layout import CONSUME_QUEUE_KEY
from mqcluster.store.segment import Segment, SegmentedFile

log = logging.getLogger(__name__)

UNIT = struct.Struct(">qiq")
BLANK_SIZE = 0x7FFFFFFF
BLANK_UNIT = UNIT.pack(0, BLANK_SIZE, 0)


@dataclass(frozen=True)
class CqEntry:
    queue_offset: int
    commitlog_offset: int
    size: int
    tags_code: int

    @property
    def blank(self) -> bool:
        return self.size == BLANK_SIZE


class ConsumeQueue:
    def __init__(self, root: str, topic: str, queue_id: int, file_size: int) -> None:
        if file_size % CQ_UNIT_SIZE:
            raise ValueError("consume queue file size must be a multiple of 20")
        self.topic = topic
        self.queue_id = queue_id
        self.files = SegmentedFile(os.path.join(root, topic, str(queue_id)), file_size,
                                   CONSUME_QUEUE_KEY)
        self._min = 0
        self.max_physical_end = 0
        self.flushed_bytes = 0

    @property
    def units_per_file(self) -> int:
        return self.files.segment_size // CQ_UNIT_SIZE

    @property
    def max_offset(self) -> int:
        """The queue offset the next entry gets."""
        return self.files.max_offset // CQ_UNIT_SIZE

    @property
    def min_offset(self) -> int:
        return max(self._min, self.files.min_offset // CQ_UNIT_SIZE)

    def load(self) -> None:
        self.files.load()

    def recover(self) -> None:
        """Find the last written entry; entries are written in order, so the first all-zero
        entry after the data marks the end."""
        segs = self.files.segments
        if not segs:
            return
        end = segs[0].start
        tail = segs[max(0, len(segs) - 2):]
        for seg in tail:
            raw = seg.read(0, seg.size)
            units = len(raw) // CQ_UNIT_SIZE
            n = 0
            while n < units:
                _, size, _ = UNIT.unpack_from(raw, n * CQ_UNIT_SIZE)
                if size <= 0:
                    break
                n += 1
            end = seg.start + n * CQ_UNIT_SIZE
            if n < units:
                break
        self.files.truncate(end)
        self.flushed_bytes = min(tail[0].start, self.files.max_offset)
        self._refresh_physical_end()

    def _refresh_physical_end(self) -> None:
        last = self.entry(self.max_offset - 1) if self.max_offset > self.min_offset else None
        self.max_physical_end = 0 if last is None or last.blank else (
            last.commitlog_offset + last.size)

    # writing
    def put(self, entries: Iterable[tuple[int, int, int, int]]) -> int:
        """Append ``(queue_offset, commitlog_offset, size, tags_code)`` entries in order.

        Entries already present are skipped (re-dispatch after recovery); a gap is filled
        with blank entries and logged. Returns the number of entries added.
        """
        if isinstance(entries, list) and entries and not self.files.empty:
            first, last = entries[0][0], entries[-1][0]
            if first == self.max_offset and last == first + len(entries) - 1:
                # The usual case: the next entries, in order, no gap (queue offsets of
                # one queue only grow, so matching ends leave no room for a gap).
                pack = UNIT.pack
                self._write(b"".join([pack(o, s, c) for _, o, s, c in entries]))
                _, cl_offset, size, _ = entries[-1]
                self.max_physical_end = cl_offset + size
                return len(entries)
        buf = bytearray()
        expected = self.max_offset
        added = 0
        for queue_offset, cl_offset, size, code in entries:
            if queue_offset < expected:
                continue
            if queue_offset > expected:
                if self.files.empty and not buf:
                    self._start_at(queue_offset)
                    expected = queue_offset
                else:
                    log.warning("consume queue %s-%d: gap %d..%d filled with blanks",
                                self.topic, self.queue_id, expected, queue_offset)
                    buf += BLANK_UNIT * (queue_offset - expected)
                    expected = queue_offset
            buf += UNIT.pack(cl_offset, size, code)
            self.max_physical_end = cl_offset + size
            expected += 1
            added += 1
        if buf:
            self._write(buf)
        return added

    def _start_at(self, queue_offset: int) -> None:
        """First entry of an empty queue is at ``queue_offset``: blank-fill its file head."""
        byte_offset = queue_offset * CQ_UNIT_SIZE
        seg = self.files.writable_segment(byte_offset)
        head = byte_offset - seg.start
        if head:
            seg.append(BLANK_UNIT * (head // CQ_UNIT_SIZE))
        self._min = queue_offset

    def _write(self, data: bytes | bytearray) -> None:
        view = memoryview(data)
        while view:
            seg = self.files.writable_segment(self.files.max_offset)
            n = min(len(view), seg.size - seg.write_pos)
            seg.append(view[:n])
            view = view[n:]

    # reading
    def entry(self, queue_offset: int) -> CqEntry | None:
        got = self.entries(queue_offset, 1)
        return got[0] if got else None

    def entries(self, queue_offset: int, max_count: int) -> list[CqEntry]:
        """Up to ``max_count`` entries from ``queue_offset`` (stops at a file end)."""
        if queue_offset < self.min_offset or queue_offset >= self.max_offset:
            return []
        byte_offset = queue_offset * CQ_UNIT_SIZE
        seg = self.files.find(byte_offset)
        if seg is None:
            return []
        pos = byte_offset - seg.start
        count = min(max_count, (seg.write_pos - pos) // CQ_UNIT_SIZE)
        raw = seg.read(pos, count * CQ_UNIT_SIZE)
        return [CqEntry(queue_offset + i, *UNIT.unpack_from(raw, i * CQ_UNIT_SIZE))
                for i in range(len(raw) // CQ_UNIT_SIZE)]

    def first_at_or_after(self, key: Callable[[CqEntry], int], target: int) -> int:
        """Smallest queue offset whose ``key`` is >= ``target`` (keys grow with the offset)."""
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            e = self.entry(mid)
            if e is None or e.blank or key(e) < target:
                lo = mid + 1
            else:
                hi = mid
        return lo

    # maintenance
    def truncate_dirty(self, commitlog_max: int) -> None:
        """Drop entries pointing at or past ``commitlog_max`` (the commitlog was cut)."""
        if self.max_physical_end <= commitlog_max:
            return
        cut = self.first_at_or_after(lambda e: e.commitlog_offset + e.size, commitlog_max + 1)
        log.info("consume queue %s-%d: truncating entries from %d (commitlog max %d)",
                 self.topic, self.queue_id, cut, commitlog_max)
        self.files.truncate(cut * CQ_UNIT_SIZE)
        self._min = min(self._min, cut)
        self._refresh_physical_end()
        self.flushed_bytes = min(self.flushed_bytes, cut * CQ_UNIT_SIZE)

    def correct_min_offset(self, commitlog_min: int) -> None:
        """The first entry still in the commitlog becomes the minimum offset."""
        self._min = self.files.min_offset // CQ_UNIT_SIZE
        self._min = self.first_at_or_after(lambda e: e.commitlog_offset, commitlog_min)

    def delete_expired(self, commitlog_min: int) -> int:
        """Delete files whose every entry points below ``commitlog_min``; never the last."""

        def expired(seg: Segment) -> bool:
            raw = seg.read(seg.write_pos - CQ_UNIT_SIZE, CQ_UNIT_SIZE)
            if len(raw) < CQ_UNIT_SIZE or not seg.full:
                return False
            cl_offset, size, _ = UNIT.unpack(raw)
            return bool(size == BLANK_SIZE or cl_offset + size <= commitlog_min)

        deleted = self.files.delete_head(expired, max_count=1 << 30)
        self.correct_min_offset(commitlog_min)
        return deleted

    @property
    def dirty(self) -> bool:
        return self.flushed_bytes < self.files.max_offset

    def flush(self, fsync: Callable[[int], None]) -> None:
        """Fsync the files written since the last flush (called from the flush thread)."""
        target = self.files.max_offset
        start = max(self.flushed_bytes, self.files.min_offset)
        for seg in self.files.between(start, max(target, start + 1)):
            if seg.fd >= 0:
                fsync(seg.fd)
        self.flushed_bytes = max(self.flushed_bytes, target)

    def destroy(self) -> None:
        for seg in list(self.files.segments):
            seg.destroy()
        self.files.segments = []

    def close(self) -> None:
        self.files.close()
