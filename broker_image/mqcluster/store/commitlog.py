"""The commitlog: single-writer appends to segment files, reads, flush and recovery."""

from __future__ import annotations

import logging
import mmap
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from mqcluster.store import codec
from mqcluster.store.batch import EncodedBatch, encode_records
from mqcluster.store.built import BuiltBatch
from mqcluster.store.codec import (
    END_FILE_MIN_BLANK_LENGTH,
    NO_QUEUE_OFFSET_TYPES,
    PREFIX,
    TRANSACTION_TYPE_MASK,
    EncodedParts,
    RecordKind,
    consumes_queue_offset,
    record_tags,
)
from mqcluster.store.damage import DamageArchive, Survey, data_extent, survey
from mqcluster.store.filter import tags_code
from mqcluster.store.layout import COMMITLOG_KEY
from mqcluster.store.message import StoredMessage
from mqcluster.store.scanner import scan
from mqcluster.store.segment import SegmentedFile, SegmentError

log = logging.getLogger(__name__)

FsyncFn = Callable[[int], None]
QueueKey = tuple[str, int]
CqEntryOf = tuple[str, int, int, int, int, int]
"""topic, queue id, queue offset, commitlog offset, size, tags code."""

RECENT_ENTRIES = 1 << 16
"""At most this many consume-queue entries wait in ``CommitLog.recent`` (dispatch lag)."""


@dataclass(slots=True)
class Appended:
    commitlog_offset: int
    queue_offset: int
    size: int


@dataclass(slots=True)
class QueueRun:
    """Consecutive messages of one queue: message ``i`` has queue offset ``first + i``."""

    topic: str
    queue_id: int
    first: int
    offsets: list[int]
    sizes: list[int]
    tags_codes: list[int]


@dataclass(slots=True)
class AppendedBatch:
    """The consume-queue entries of one local append of ``[start, end)``.

    The dispatcher takes them instead of reading the bytes back; anything it cannot
    match this way (replicated bytes, batches dropped from the bounded history) it
    scans from the commitlog as before.
    """

    start: int
    end: int
    entries: list[CqEntryOf]
    store_timestamp: int
    runs: list[QueueRun] = field(default_factory=list)
    """Producer batches' entries in compact form, one run per queue."""
    count: int = field(init=False)
    """Entries in all (counted once: the bounded history adds and takes them)."""

    def __post_init__(self) -> None:
        count = len(self.entries)
        for run in self.runs:
            count += len(run.offsets)
        self.count = count


@dataclass
class RecoveryReport:
    """What commitlog recovery found: where it scanned and where (and why) it cut."""

    scanned_from: int = 0
    max_offset: int = 0
    truncated_at: int | None = None
    reason: str = ""
    corrupt: bool = False
    """The cut is below the offset known to be fsynced: damage, not a torn tail."""
    messages_scanned: int = 0
    records_lost: int = 0
    """Records cut off: intact ones after the cut plus one per damaged region."""
    records_lost_exact: bool = True
    """False when a damaged region's length field is damaged too (it may have held more)."""
    intact_lost: int = 0
    damaged: list[tuple[int, int]] = field(default_factory=list)
    """``[start, end)`` offsets of the unreadable regions cut off."""
    set_aside_bytes: int = 0
    set_aside: list[str] = field(default_factory=list)
    """Files the cut-off bytes were copied to (``damage.DamageArchive``)."""


class CommitLog:
    def __init__(self, directory: str, segment_size: int, fsync: FsyncFn) -> None:
        self.files = SegmentedFile(directory, segment_size, COMMITLOG_KEY)
        self._fsync = fsync
        self.flushed_offset = 0
        self.last_store_timestamp = 0
        self.queue_offsets: dict[QueueKey, int] = {}
        self._table_scanned_to = 0
        self.recent: deque[AppendedBatch] = deque()
        self._recent_entries = 0

    @property
    def segment_size(self) -> int:
        return self.files.segment_size

    @property
    def min_offset(self) -> int:
        return self.files.min_offset

    @property
    def max_offset(self) -> int:
        return self.files.max_offset

    def load(self) -> None:
        self.files.load()

    # writing
    def fits(self, size: int) -> bool:
        return size + END_FILE_MIN_BLANK_LENGTH <= self.segment_size

    def append(self, batch: Sequence[EncodedParts], store_timestamp: int) -> list[Appended]:
        """Append whole records; a record that does not fit rolls to a new segment."""
        self._catch_up_queue_offsets()
        start = self.max_offset
        touched: dict[QueueKey, int | None] = {}
        try:
            return self._append(batch, store_timestamp, touched)
        except OSError:
            self._roll_back(start, touched)
            raise

    def append_batch(self, enc: EncodedBatch, store_timestamp: int) -> tuple[int, list[int]]:
        """Append one queue's batch; returns (first queue offset, commitlog offsets)."""
        self._catch_up_queue_offsets()
        start = self.max_offset
        b = enc.batch
        key = (b.topic, b.queue_id)
        old = self.queue_offsets.get(key)
        try:
            return self._append_batch(enc, store_timestamp, old or 0)
        except OSError:
            self._roll_back(start, {key: old})
            raise

    def append_batches(self, encs: Sequence[EncodedBatch],
                       store_timestamp: int) -> list[tuple[int, list[int]]] | None:
        """Several batches (of any queues) one after another with one write; returns each
        one's (first queue offset, commitlog offsets). None (nothing written) when they do
        not all fit the segment being written: then they go one by one (``append_batch``).
        The dispatcher gets one run per queue for them all: a pipelining producer's
        burst is many one-message batches over a few queues."""
        self._catch_up_queue_offsets()
        batch_start = self.max_offset
        seg = self.files.writable_segment(batch_start)
        total = sum(sum(e.sizes) for e in encs)
        if seg.write_pos + total + END_FILE_MIN_BLANK_LENGTH > seg.size:
            return None
        queue_offsets = self.queue_offsets
        runs: dict[QueueKey, QueueRun] = {}
        parts: list[bytes] = []
        placed: list[tuple[int, list[int]]] = []
        pos = seg.start + seg.write_pos
        for enc in encs:
            b = enc.batch
            key = (b.topic, b.queue_id)
            run = runs.get(key)
            if run is None:
                run = runs[key] = QueueRun(b.topic, b.queue_id, queue_offsets.get(key, 0),
                                           [], [], [])
            first = run.first + len(run.offsets)
            sizes = enc.sizes
            if len(sizes) == 1:
                offsets = [pos]
                pos += sizes[0]
            else:
                offsets = list(accumulate(sizes, initial=pos))
                pos = offsets.pop()
            parts += encode_records(enc, 0, len(sizes), first, offsets, store_timestamp)
            run.offsets += offsets
            run.sizes += sizes
            run.tags_codes += b.tags_codes
            placed.append((first, offsets))
        try:
            seg.append_parts(parts)
        except OSError:
            self._roll_back(batch_start, {})  # (queue offsets are set only after the write)
            raise
        for key, run in runs.items():
            queue_offsets[key] = run.first + len(run.offsets)
        self._remember(AppendedBatch(batch_start, pos, [], store_timestamp,
                                     list(runs.values())))
        self.last_store_timestamp = store_timestamp
        self._table_scanned_to = self.max_offset
        return placed

    def _roll_back(self, start: int, queue_offsets: dict[QueueKey, int | None]) -> None:
        """Undo an append that failed part way: the files back to ``start``, and the
        given queues' next offsets back to what they were (None: the queue was new)."""
        log.exception("commitlog append failed at %d; rolling back", start)
        for key, old in queue_offsets.items():
            if old is None:
                self.queue_offsets.pop(key, None)
            else:
                self.queue_offsets[key] = old
        self.files.truncate(start)
        self._table_scanned_to = start

    def _append_batch(self, enc: EncodedBatch, store_timestamp: int,
                      first: int) -> tuple[int, list[int]]:
        batch_start = self.max_offset
        seg = self.files.writable_segment(batch_start)
        b = enc.batch
        sizes = enc.sizes
        ends = list(accumulate(sizes))  # end of message i, relative to the batch's start
        starts = [0, *ends[:-1]]
        offsets: list[int] = []
        i, n = 0, len(sizes)
        while i < n:
            room = seg.size - seg.write_pos - END_FILE_MIN_BLANK_LENGTH
            stop = bisect_right(ends, starts[i] + room, i)  # messages i..stop-1 fit here
            if stop == i:
                if seg.write_pos == 0:
                    raise SegmentError(f"a {sizes[i]} byte message does not fit a segment")
                seg.append(codec.encode_blank(seg.size - seg.write_pos))
                seg.write_pos = seg.size  # the blank record covers the rest of the file
                seg = self.files.create(seg.limit)
                continue
            shift = seg.start + seg.write_pos - starts[i]
            placed = [shift + start for start in starts[i:stop]]
            seg.append_parts(encode_records(enc, i, stop, first + i, placed, store_timestamp))
            offsets += placed
            i = stop
        self._appended_run(batch_start, QueueRun(b.topic, b.queue_id, first, offsets, sizes,
                                                 b.tags_codes), store_timestamp)
        return first, offsets

    def _appended_run(self, batch_start: int, run: QueueRun, store_timestamp: int) -> None:
        self.queue_offsets[(run.topic, run.queue_id)] = run.first + len(run.offsets)
        self.last_store_timestamp = store_timestamp
        self._table_scanned_to = self.max_offset
        self._remember(AppendedBatch(batch_start, self.max_offset, [], store_timestamp, [run]))

    def _append(self, batch: Sequence[EncodedParts], store_timestamp: int,
                touched: dict[QueueKey, int | None]) -> list[Appended]:
        batch_start = self.max_offset
        seg = self.files.writable_segment(batch_start)
        buf = bytearray()
        out: list[Appended] = []
        entries: list[CqEntryOf] = []
        queue_offsets = self.queue_offsets
        encode = codec.encode
        for parts in batch:
            used = seg.write_pos + len(buf)
            if used + parts.size + END_FILE_MIN_BLANK_LENGTH > seg.size:
                buf += codec.encode_blank(seg.size - used)
                seg.append(buf)
                seg.write_pos = seg.size
                buf = bytearray()
                seg = self.files.create(seg.limit)
                used = 0
            rec = parts.rec
            physical = seg.start + used
            if rec.sys_flag & TRANSACTION_TYPE_MASK in NO_QUEUE_OFFSET_TYPES:
                buf += encode(parts, 0, physical, store_timestamp)
                out.append(Appended(physical, 0, parts.size))
                continue
            key = (rec.topic, rec.queue_id)
            queue_offset = queue_offsets.get(key, 0)
            buf += encode(parts, queue_offset, physical, store_timestamp)
            if key not in touched:
                touched[key] = queue_offsets.get(key)
            queue_offsets[key] = queue_offset + 1
            tags = record_tags(rec)
            entries.append((rec.topic, rec.queue_id, queue_offset, physical, parts.size,
                            tags_code(tags) if tags else 0))
            out.append(Appended(physical, queue_offset, parts.size))
        seg.append(buf)
        self.last_store_timestamp = store_timestamp
        self._table_scanned_to = self.max_offset
        self._remember(AppendedBatch(batch_start, self.max_offset, entries, store_timestamp))
        return out

    def _remember(self, batch: AppendedBatch) -> None:
        self.recent.append(batch)
        self._recent_entries += batch.count
        while self._recent_entries > RECENT_ENTRIES and len(self.recent) > 1:
            self.take_recent()

    def remember_built(self, builts: Sequence[BuiltBatch]) -> None:
        """Consume-queue entries of batches just written as raw bytes, in order."""
        for b in builts:
            run = QueueRun(b.topic, b.queue_id, b.first_queue_offset, b.offsets, b.sizes,
                           b.tags_codes)
            self._remember(AppendedBatch(b.start, b.start + sum(b.sizes), [],
                                         b.store_timestamp, [run]))

    def next_recent(self, pos: int) -> AppendedBatch | None:
        """The oldest remembered append starting at or after ``pos`` (older ones are dropped)."""
        while self.recent and self.recent[0].start < pos:
            self.take_recent()
        return self.recent[0] if self.recent else None

    def take_recent(self) -> AppendedBatch:
        batch = self.recent.popleft()
        self._recent_entries -= batch.count
        return batch

    def forget_recent(self) -> None:
        self.recent.clear()
        self._recent_entries = 0

    def append_raw(self, offset: int, data: bytes | memoryview,
                   keep_recent: bool = False) -> bool:
        """Append replicated bytes at ``offset``: the current end, or any segment start
        when the commitlog is empty (a replica that starts from the master's last file).
        ``keep_recent``: the appends remembered stay (``remember_built`` describes these
        bytes too)."""
        if not keep_recent:
            self.forget_recent()
        if self.files.empty and offset % self.segment_size == 0:
            self._table_scanned_to = offset
            self.flushed_offset = offset
        elif offset != self.max_offset:
            return False
        view = memoryview(data)
        while view:
            seg = self.files.writable_segment(offset)
            n = min(len(view), seg.size - seg.write_pos)
            seg.append(view[:n])
            view = view[n:]
            offset += n
        return True

    def _catch_up_queue_offsets(self) -> None:
        """Account for records appended without assigning offsets here (replicated ones)."""
        end = self.max_offset
        if self._table_scanned_to >= end:
            return
        pos = self._table_scanned_to
        for off, rec in scan(self.files, pos, end, verify_crc=False):
            if rec.kind is RecordKind.MESSAGE and rec.info is not None:
                info = rec.info
                if consumes_queue_offset(info.sys_flag):
                    key = (info.topic, info.queue_id)
                    self.queue_offsets[key] = max(self.queue_offsets.get(key, 0),
                                                  info.queue_offset + 1)
                self.last_store_timestamp = max(self.last_store_timestamp,
                                                info.store_timestamp)
                pos = off + rec.size
            elif rec.kind is RecordKind.BLANK:
                pos = off + rec.size
        self._table_scanned_to = pos

    def next_queue_offset(self, topic: str, queue_id: int) -> int:
        self._catch_up_queue_offsets()
        return self.queue_offsets.get((topic, queue_id), 0)

    @property
    def accounted_to(self) -> int:
        """Where the queue-offset table stops accounting for the records (replicated
        bytes are accounted for only when needed)."""
        return self._table_scanned_to

    def complete_offset(self) -> int:
        """End of the last whole record (replicated bytes may stop inside one)."""
        self._catch_up_queue_offsets()
        return self._table_scanned_to

    def reset_queue_offsets(self, table: dict[QueueKey, int], accounted_to: int) -> None:
        """Take queue offsets from the consume queues, complete below ``accounted_to``."""
        self.queue_offsets = dict(table)
        self._table_scanned_to = min(accounted_to, self.max_offset)
        self.forget_recent()

    # reading
    def read(self, offset: int, max_bytes: int) -> bytes:
        seg = self.files.find(offset)
        if seg is None or offset >= seg.end:
            return b""
        return seg.read(offset - seg.start, min(max_bytes, seg.end - offset))

    def region(self, offset: int, max_bytes: int) -> tuple[int, int, int] | None:
        """``(fd, position in the file, length)`` of the written bytes from ``offset``,
        at most ``max_bytes``, never crossing a segment end; None if there are none."""
        seg = self.files.find(offset)
        if seg is None or offset >= seg.end or seg.fd < 0:
            return None
        return seg.fd, offset - seg.start, min(max_bytes, seg.end - offset)

    def read_message(self, offset: int, size: int | None = None) -> StoredMessage | None:
        """The message at ``offset``, or ``None`` if there is none or it fails its CRC."""
        if offset < self.min_offset or offset >= self.max_offset:
            return None
        seg = self.files.find(offset)
        if seg is None:
            return None
        pos = offset - seg.start
        if size is None:
            prefix = seg.read(pos, PREFIX.size)
            if len(prefix) < PREFIX.size:
                return None
            size, _ = PREFIX.unpack(prefix)
            if size <= 0 or size > seg.size:
                return None
        buf = seg.read(pos, size)
        checked = codec.check(buf, 0, offset, True, seg.size)
        if checked.kind is not RecordKind.MESSAGE:
            if checked.kind is RecordKind.CORRUPT:
                log.error("commitlog record at %d is corrupt: %s", offset, checked.reason)
            return None
        return codec.decode(buf)

    def store_timestamp_at(self, offset: int) -> int | None:
        seg = self.files.find(offset)
        if seg is None:
            return None
        raw = seg.read(offset - seg.start, codec.HEADER.size)
        if len(raw) < codec.HEADER.size:
            return None
        fields = codec.HEADER.unpack(raw)
        return int(fields[9]) if fields[1] == codec.MESSAGE_MAGIC else None

    # flushing
    def fsync_range(self, start: int, end: int) -> None:
        """Fsync every segment holding bytes of ``[start, end)``; runs in the flush thread."""
        for seg in self.files.between(start, max(end, start + 1)):
            if seg.fd >= 0:
                self._fsync(seg.fd)

    # recovery and truncation
    def recover(self, from_offset: int, verify_crc: bool, durable_offset: int,
                archive: DamageArchive | None = None) -> RecoveryReport:
        """Scan from the segment holding ``from_offset``; cut after the last valid record.

        A bad record below ``durable_offset`` (known fsynced) is damage and logged as an
        error; above it, it is the torn tail of writes a crash interrupted. Whatever
        written bytes the cut drops are counted and first copied to ``archive``.
        """
        report = RecoveryReport()
        if self.files.empty:
            return report
        last = self.files.segments[-1]
        start_seg = self.files.find(min(from_offset, last.limit - 1)) or self.files.segments[0]
        report.scanned_from = start_seg.start
        end = last.limit
        pos = start_seg.start
        stop_kind: RecordKind | None = None
        for off, rec in scan(self.files, pos, end, verify_crc):
            if rec.kind is RecordKind.MESSAGE and rec.info is not None:
                report.messages_scanned += 1
                self.last_store_timestamp = max(self.last_store_timestamp,
                                                rec.info.store_timestamp)
                pos = off + rec.size
            elif rec.kind is RecordKind.BLANK:
                pos = off + rec.size
            else:
                stop_kind = rec.kind
                report.reason = rec.reason or rec.kind.value
                pos = off
        bad_record = stop_kind in (RecordKind.CORRUPT, RecordKind.INCOMPLETE)
        if archive is not None:
            # Also where the scan met zeros: records may follow a zeroed block.
            self._set_aside(pos, archive, report)
        if (bad_record or pos < durable_offset or self._has_segments_after(pos)
                or report.set_aside):
            report.corrupt = pos < durable_offset
            report.truncated_at = pos
            if report.corrupt and not report.damaged:  # fsynced, now zeros: gone
                report.damaged = [(pos, durable_offset)]
                report.records_lost += 1
                report.records_lost_exact = False
            self._log_cut(report, durable_offset)
        self.truncate(pos)
        report.max_offset = self.max_offset
        self.fsync_range(report.scanned_from, self.max_offset)
        self.flushed_offset = self.max_offset
        return report

    def _set_aside(self, pos: int, archive: DamageArchive, report: RecoveryReport) -> None:
        """Count the records written from ``pos`` on and copy their bytes to ``archive``."""
        found = Survey()
        stamp = archive.stamp()
        for seg in self.files.between(pos, self.files.max_offset):
            lo = max(pos, seg.start) - seg.start
            allocated, nonzero = data_extent(seg.fd, lo, seg.size)
            if nonzero <= lo:
                continue
            with mmap.mmap(seg.fd, allocated, prot=mmap.PROT_READ) as buf:
                hi = survey(buf, lo, nonzero, seg.start, seg.size, self.segment_size, found)
            report.set_aside.append(archive.save(seg.start + lo, seg.fd, lo, hi - lo, stamp))
            report.set_aside_bytes += hi - lo
        report.records_lost = found.records_lost
        report.records_lost_exact = found.exact
        report.intact_lost = found.intact
        report.damaged = found.damaged

    @staticmethod
    def _log_cut(report: RecoveryReport, durable_offset: int) -> None:
        """One line: an error where fsynced or intact records were lost, else a warning
        (the torn tail of writes a crash interrupted, which nobody was told were stored)."""
        pos = report.truncated_at
        damaged = report.corrupt or report.intact_lost > 0
        what, level = ("damaged", logging.ERROR) if damaged else ("torn tail", logging.WARNING)
        lost = (f"{'' if report.records_lost_exact else 'at least '}{report.records_lost} "
                f"record(s) lost from this replica ({report.intact_lost} intact, "
                f"{len(report.damaged)} damaged region(s) "
                f"{', '.join(f'{a}..{b}' for a, b in report.damaged) or 'none'})")
        kept = (f"{report.set_aside_bytes} bytes from offset {pos} copied to "
                f"{', '.join(report.set_aside)}" if report.set_aside else "nothing written past it")
        log.log(level, "commitlog %s at offset %d (%s, fsynced up to %d): %s; %s; cut at %d",
                what, pos, report.reason, durable_offset, lost, kept, pos)

    def is_record_start(self, offset: int) -> bool:
        """``offset`` is where a whole, CRC-valid record (or the blank filling a segment's
        end) starts, or this log's start or end: a place the log can be cut without
        tearing a record."""
        if offset in (self.min_offset, self.max_offset) or offset % self.segment_size == 0:
            return True
        for _, rec in scan(self.files, offset, self.max_offset, verify_crc=True,
                           chunk=64 * 1024):
            return rec.kind in (RecordKind.MESSAGE, RecordKind.BLANK)
        return False

    def _has_segments_after(self, pos: int) -> bool:
        last = self.files.last
        return last is not None and last.start > pos

    def truncate(self, offset: int) -> None:
        """Drop everything at or after ``offset`` (a record boundary), durably: the cut
        is fsynced before anyone (the checkpoint, the epoch file) can record it. Unsynced,
        a power loss brings the old tail back under a checkpoint and epoch entries that
        say it is gone (ASYNC_FLUSH: no later flush covers a cut with nothing after it)."""
        self.forget_recent()
        self.files.truncate(offset)
        last = self.files.last
        if last is not None and last.fd >= 0:
            self._fsync(last.fd)
        self.flushed_offset = min(self.flushed_offset, offset)
        self._table_scanned_to = min(self._table_scanned_to, offset)

    def clear(self) -> None:
        """Delete every segment: the replica starts again from the master's files."""
        self.forget_recent()
        self.files.truncate(-1)
        self.flushed_offset = 0
        self._table_scanned_to = 0
        self.queue_offsets = {}

    def close(self) -> None:
        self.files.close()
