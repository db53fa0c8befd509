"""Durable Raft log: append-only segment files, hard state and snapshot files.

The directory under ``root`` and the record layout: docs/formats.md, "Raft log on
disk". A batch of records is written with one ``write`` and made durable with one
``fsync``.

Recovery: an incomplete record (or a zero-filled or CRC-failing final record)
at the very end of the last segment is a torn write from a crash and is cut
off. Any other bad record raises ``CorruptLogError`` naming the file and the
offset: skipping it would silently lose acknowledged entries.

Page cache: the log is a journal, read back only at a restart or for a follower
further behind than the runner's in-memory entries, so each fsync'd range of the
tail is dropped from the page cache (as a BookKeeper journal does). Left there,
the cache would grow by every byte written: pages the kernel must find (on a VM whose
host takes back the guest's free memory, pages the host must fault in again, dearer
than refilling the ones just dropped; ``python -m bench store`` prints both), and
memory charged to the pod's cgroup.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mqcluster.common.crc import crc32
from mqcluster.common.files import atomic_write, fsync_dir, makedirs_durable
from mqcluster.raft import diskformat as fmt
from mqcluster.raft.limits import MAX_TERM
from mqcluster.raft.types import Entry, EntryType, HardState, Snapshot, StoredEntries

log = logging.getLogger(__name__)

_REC = struct.Struct(">IIQQB")
_REC_HEAD = _REC.size  # 25
_BODY_FIXED = _REC_HEAD - 8  # index+term+type = 17
_IDX_TERM_TYPE = struct.Struct(">QQB")
_LEN_CRC = struct.Struct(">II")
_SEG_SUFFIX = ".seg"
DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
MAX_RECORD_BYTES = 256 * 1024 * 1024
_ENTRY_TYPES = frozenset(int(t) for t in EntryType)
_PAGE = os.sysconf("SC_PAGE_SIZE")


class CorruptLogError(fmt.RaftStoreError):
    """A record that is not the torn tail of the log failed validation."""

    def __init__(self, path: Path, offset: int, reason: str) -> None:
        super().__init__(f"corrupt raft log {path} at offset {offset}: {reason}")
        self.path = path
        self.offset = offset
        self.reason = reason


def encode_record(entry: Entry) -> bytes:
    data = entry.data
    body = _IDX_TERM_TYPE.pack(entry.index, entry.term, int(entry.type)) + data
    return _LEN_CRC.pack(len(body), crc32(body)) + body


@dataclass
class _Segment:
    path: Path
    first_index: int
    offsets: array[int] = field(default_factory=lambda: array("Q"))
    terms: array[int] = field(default_factory=lambda: array("Q"))
    types: array[int] = field(default_factory=lambda: array("B"))
    size: int = 0

    @property
    def last_index(self) -> int:
        return self.first_index + len(self.offsets) - 1


@dataclass
class LoadedState:
    """What a node needs to restart: hard state, snapshot and the entries after it
    (with their data, or only ``stored``: see ``DiskLog.load``)."""

    hard_state: HardState
    snapshot: Snapshot | None
    entries: list[Entry]
    stored: StoredEntries | None = None


@dataclass(frozen=True)
class PendingSync:
    """A duplicate of the tail's descriptor and the bytes of it written so far."""

    fd: int
    size: int
    dropped_to: int


class DiskLog:
    """The on-disk Raft log of one node. Not thread-safe: one writer at a time."""

    LOG_DIR = "log"
    """The segments' directory under ``root`` (a log whose records hold something else
    than whole entries keeps them apart, so neither layout is read as the other)."""

    def __init__(self, root: str | Path, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 drop_synced_pages: bool = True) -> None:
        self.root = Path(root)
        self.log_dir = self.root / self.LOG_DIR
        self.segment_bytes = segment_bytes
        self.drop_synced_pages = drop_synced_pages
        self._dropped_to = 0  # bytes of the tail segment dropped from the page cache
        makedirs_durable(self.log_dir)  # its entry and its parents', durable at once
        self._segments: list[_Segment] = []
        self._fd: int | None = None
        self._unsynced = False  # appended with sync=False and not synced since
        self._snapshot_index = 0
        self._snapshot_term = 0
        self._hard_state = HardState(term=0, voted_for=None)
        self._snapshot: Snapshot | None = None
        self._recover()

    # ------------------------------------------------------------------ recovery

    def _recover(self) -> None:
        for stale in self.root.glob("*.tmp"):
            stale.unlink()
        hs_path = self.root / "hardstate"
        if hs_path.exists():
            self._hard_state = fmt.decode_hard_state(hs_path.read_bytes(), hs_path)
        snap_path = self.root / "snapshot"
        if snap_path.exists():
            self._snapshot = fmt.decode_snapshot(snap_path.read_bytes(), snap_path)
            self._snapshot_index = self._snapshot.meta.index
            self._snapshot_term = self._snapshot.meta.term
        paths = sorted(self.log_dir.glob("*" + _SEG_SUFFIX))
        for n, path in enumerate(paths):
            seg = self._scan_segment(path, last=n == len(paths) - 1)
            if self._segments and seg.offsets and seg.first_index != self._last_index() + 1:
                raise CorruptLogError(
                    path, 0, f"segment starts at index {seg.first_index}, "
                    f"expected {self._last_index() + 1}"
                )
            if not seg.offsets:
                if n != len(paths) - 1:
                    raise CorruptLogError(path, 0, "empty segment before the last one")
                # Created just before a crash; the next append recreates it.
                path.unlink()
                continue
            self._segments.append(seg)
        # A crash while installing or compacting to a snapshot can leave
        # segments the snapshot covers or contradicts; finish the job.
        if self._snapshot is not None:
            idx, term = self._snapshot_index, self._snapshot_term
            last = self._last_index()
            first = self._segments[0].first_index if self._segments else idx + 1
            if last < idx or (first <= idx and self.term_at_log(idx) != term):
                self._drop_segments_upto(None)
            else:
                self._drop_segments_upto(idx)
        if self._segments and self._segments[0].first_index > self._snapshot_index + 1:
            seg = self._segments[0]
            raise CorruptLogError(
                seg.path, 0,
                f"log starts at index {seg.first_index} but the snapshot "
                f"ends at {self._snapshot_index}",
            )
        if self._segments:
            self._open_tail()

    def _scan_segment(self, path: Path, *, last: bool) -> _Segment:
        first = int(path.name[: -len(_SEG_SUFFIX)])
        seg = _Segment(path=path, first_index=first)
        buf = path.read_bytes()
        pos, end = 0, len(buf)
        expected = first
        while pos < end:
            problem = _check_record(buf, pos, expected)
            if problem is not None:
                reason, at_tail = problem
                if not (last and at_tail):
                    raise CorruptLogError(path, pos, reason)
                log.warning("truncating torn tail of %s at offset %d: %s", path, pos, reason)
                with open(path, "r+b") as f:
                    f.truncate(pos)
                    os.fsync(f.fileno())
                break
            length, _crc, _index, term, typ = _REC.unpack_from(buf, pos)
            seg.offsets.append(pos)
            seg.terms.append(term)
            seg.types.append(typ)
            pos += 8 + length
            expected += 1
        seg.size = pos
        return seg

    def _open_tail(self) -> None:
        self._close_fd()
        self._fd = os.open(self._segments[-1].path, os.O_WRONLY | os.O_APPEND)
        self._dropped_to = 0

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # ------------------------------------------------------------------ queries

    @property
    def hard_state(self) -> HardState:
        return self._hard_state

    @property
    def snapshot(self) -> Snapshot | None:
        return self._snapshot

    @property
    def first_index(self) -> int:
        """Index of the first entry after the snapshot (compaction keeps whole segments)."""
        return self._snapshot_index + 1

    @property
    def snapshot_index(self) -> int:
        return self._snapshot_index

    def _last_index(self) -> int:
        for seg in reversed(self._segments):
            if seg.offsets:
                return seg.last_index
        return self._snapshot_index

    @property
    def last_index(self) -> int:
        return self._last_index()

    def _locate(self, index: int) -> tuple[_Segment, int]:
        for seg in reversed(self._segments):
            if seg.first_index <= index <= seg.last_index:
                return seg, index - seg.first_index
        raise IndexError(f"index {index} not in log [{self.first_index}, {self.last_index}]")

    def term_at(self, index: int) -> int:
        if index == self._snapshot_index:
            return self._snapshot_term
        return self.term_at_log(index)

    def term_at_log(self, index: int) -> int:
        seg, i = self._locate(index)
        return seg.terms[i]

    def entries(self, lo: int, hi: int | None = None) -> list[Entry]:
        """Entries with ``lo <= index < hi`` (to the end when ``hi`` is None)."""
        hi = self.last_index + 1 if hi is None else min(hi, self.last_index + 1)
        if lo <= self._snapshot_index and lo < hi:
            raise IndexError(f"index {lo} is compacted (first index {self.first_index})")
        out: list[Entry] = []
        for seg in self._segments:
            if not seg.offsets or seg.last_index < lo or seg.first_index >= hi:
                continue
            a = max(lo, seg.first_index) - seg.first_index
            b = min(hi - 1, seg.last_index) - seg.first_index
            start = seg.offsets[a]
            stop = seg.offsets[b + 1] if b + 1 < len(seg.offsets) else seg.size
            with open(seg.path, "rb") as f:
                f.seek(start)
                buf = f.read(stop - start)
            out.extend(_decode_records(buf))
        return out

    def load(self, *, with_data: bool = True) -> LoadedState:
        """Hard state, snapshot and the entries after it; ``with_data=False``: only
        their terms, types and sizes (a long log need not fit in memory)."""
        if with_data:
            return LoadedState(self._hard_state, self._snapshot, self.entries(self.first_index))
        terms, types, sizes = array("Q"), array("B"), array("Q")
        for seg in self._segments:
            terms.extend(seg.terms)
            types.extend(seg.types)
            ends = [*seg.offsets[1:], seg.size]
            sizes.extend(end - start - _REC_HEAD for start, end in zip(seg.offsets, ends,
                                                                        strict=True))
        first = self._segments[0].first_index if self._segments else self.first_index
        return LoadedState(self._hard_state, self._snapshot, [],
                           StoredEntries(first, terms, types, sizes))

    # ------------------------------------------------------------------ writes

    def save_hard_state(self, hs: HardState) -> None:
        """Durably replace term/vote; must complete before any vote is answered."""
        atomic_write(self.root / "hardstate", fmt.encode_hard_state(hs))
        self._hard_state = hs

    def append(
        self, entries: Sequence[Entry], records: bytes | None = None, *, sync: bool = True
    ) -> None:
        """Append contiguous entries and fsync once (``sync=False``: the caller calls
        ``sync()`` later, before counting them as durable).

        An entry whose index is not ``last_index + 1`` first truncates the
        log from that index (a conflicting suffix from an older leader).
        ``records``, if given, must be exactly the encoded records of ``entries``
        (``diskformat.encode_records``, or a received body whose CRCs were
        checked when the entries were decoded from it); it is written as is.
        """
        if not entries:
            return
        first = entries[0].index
        if first <= self.last_index:
            self.truncate_from(first)
        if first != self.last_index + 1:
            raise ValueError(f"append at index {first} leaves a gap after {self.last_index}")
        seg = self._segments[-1] if self._segments else None
        if seg is None or seg.size >= self.segment_bytes:
            seg = self._new_segment(first)
        parts: list[bytes] = []
        pos = seg.size
        offsets, terms, types = seg.offsets, seg.terms, seg.types
        n_before = len(offsets)
        try:
            expected = first
            if records is None:
                pack_head, pack_len_crc = _IDX_TERM_TYPE.pack, _LEN_CRC.pack
                for e in entries:
                    if e.index != expected:
                        raise ValueError(f"entries not contiguous: {e.index} after {expected - 1}")
                    expected += 1
                    # Same bytes as encode_record, without concatenating each record.
                    head = pack_head(e.index, e.term, e.type)
                    data = e.data
                    length = _BODY_FIXED + len(data)
                    parts += (pack_len_crc(length, crc32(data, crc32(head))), head, data)
                    offsets.append(pos)
                    terms.append(e.term)
                    types.append(e.type)
                    pos += 8 + length
                records = b"".join(parts)
            else:
                start = pos
                for e in entries:
                    if e.index != expected:
                        raise ValueError(f"entries not contiguous: {e.index} after {expected - 1}")
                    expected += 1
                    offsets.append(pos)
                    terms.append(e.term)
                    types.append(e.type)
                    pos += _REC_HEAD + len(e.data)
                if pos - start != len(records):
                    raise ValueError(
                        f"records of {len(records)} bytes do not encode these "
                        f"{len(entries)} entries ({pos - start} bytes)"
                    )
            assert self._fd is not None
            _write_all(self._fd, records)
            if sync:
                self._fsync_tail(pos)
            else:
                self._unsynced = True
        except BaseException:
            # Forget what is not durable; a partial write is cut off as a torn tail on reopen.
            del offsets[n_before:]
            del terms[n_before:]
            del types[n_before:]
            if self._fd is not None:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, seg.size)
            raise
        seg.size = pos

    def sync(self) -> None:
        """Make everything appended so far durable (see ``append(sync=False)``)."""
        if self._unsynced and self._fd is not None:
            self._unsynced = False
            self._fsync_tail(self._segments[-1].size)

    def _fsync_tail(self, end: int) -> None:
        """fsync the tail segment, written up to ``end``, and drop what it makes durable
        from the page cache."""
        assert self._fd is not None
        os.fsync(self._fd)
        self._dropped_to = self._drop_pages(self._fd, self._dropped_to, end)

    def begin_sync(self) -> PendingSync | None:
        """A duplicate of the tail's descriptor whose ``sync_descriptor`` (in any
        thread) makes everything appended so far durable, or None when all of it
        is already. Appends may go on meanwhile: they are covered by a later sync,
        and a segment change or truncation cannot close the duplicate under the fsync."""
        if not self._unsynced or self._fd is None:
            return None
        self._unsynced = False
        size = self._segments[-1].size
        pending = PendingSync(os.dup(self._fd), size, self._dropped_to)
        # The next range starts at this one's end even before its fsync is done.
        self._dropped_to = _page_floor(size) if self.drop_synced_pages else 0
        return pending

    def sync_descriptor(self, pending: PendingSync) -> None:
        """The fsync of a ``begin_sync`` descriptor, which it closes."""
        try:
            os.fsync(pending.fd)
            self._drop_pages(pending.fd, pending.dropped_to, pending.size)
        finally:
            os.close(pending.fd)

    def _drop_pages(self, fd: int, start: int, end: int) -> int:
        """Drop ``[start, end)`` of a segment, fsync'd, from the page cache; where the
        next range starts (the page ``end`` is in, which the kernel keeps when partial)."""
        if not self.drop_synced_pages or end <= start:
            return start
        os.posix_fadvise(fd, start, end - start, os.POSIX_FADV_DONTNEED)
        return _page_floor(end)

    def _new_segment(self, first_index: int) -> _Segment:
        self.sync()  # the old tail's entries, before its descriptor goes
        path = self.log_dir / f"{first_index:020d}{_SEG_SUFFIX}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.close(fd)
        fsync_dir(self.log_dir)
        seg = _Segment(path=path, first_index=first_index)
        self._segments.append(seg)
        self._open_tail()
        return seg

    def truncate_from(self, index: int) -> None:
        """Drop entries with index >= ``index`` (conflict truncation), durably."""
        if index <= self._snapshot_index:
            raise ValueError(
                f"cannot truncate at {index}: the snapshot covers up to {self._snapshot_index}"
            )
        if index > self.last_index:
            return
        removed_files = False
        while self._segments and self._segments[-1].first_index >= index:
            seg = self._segments.pop()
            seg.path.unlink()
            removed_files = True
        self._close_fd()
        if self._segments:
            seg = self._segments[-1]
            i = index - seg.first_index
            if i < len(seg.offsets):
                cut = seg.offsets[i]
                del seg.offsets[i:]
                del seg.terms[i:]
                del seg.types[i:]
                seg.size = cut
                with open(seg.path, "r+b") as f:
                    f.truncate(cut)
                    os.fsync(f.fileno())
            self._open_tail()
        if removed_files:
            fsync_dir(self.log_dir)

    def save_snapshot(self, snap: Snapshot) -> None:
        """Durably store ``snap`` and compact whole segments it covers.

        If the snapshot is past the end of the log or disagrees with the
        term at its index, the log is discarded: a follower installing a
        leader's snapshot keeps nothing older.
        """
        atomic_write(self.root / "snapshot", fmt.encode_snapshot(snap))
        self._snapshot = snap
        idx, term = snap.meta.index, snap.meta.term
        first = self._segments[0].first_index if self._segments else idx + 1
        keep_log = first <= idx <= self.last_index and self.term_at_log(idx) == term
        self._snapshot_index, self._snapshot_term = idx, term
        if keep_log:
            self._drop_segments_upto(idx)
        else:
            self._drop_segments_upto(None)

    def compact(self, index: int) -> None:
        """Remove whole segments whose entries all have index <= ``index`` (and the snapshot's)."""
        self._drop_segments_upto(min(index, self._snapshot_index))

    def _drop_segments_upto(self, index: int | None) -> None:
        """Delete segments whose entries all have index <= ``index``; all when None."""
        dropped = False
        while self._segments:
            seg = self._segments[0]
            if index is not None and seg.offsets and seg.last_index > index:
                break
            self._segments.pop(0)
            seg.path.unlink()
            dropped = True
        if not self._segments:
            self._close_fd()
        if dropped:
            fsync_dir(self.log_dir)

    def close(self) -> None:
        self._close_fd()

    def __enter__(self) -> DiskLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _page_floor(offset: int) -> int:
    return offset - offset % _PAGE


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _decode_records(buf: bytes) -> Iterable[Entry]:
    pos, end = 0, len(buf)
    unpack = _REC.unpack_from
    while pos < end:
        length, _crc, index, term, typ = unpack(buf, pos)
        data = buf[pos + _REC_HEAD : pos + 8 + length]
        yield Entry(index=index, term=term, type=EntryType(typ), data=data)
        pos += 8 + length


def _check_record(buf: bytes, pos: int, expected: int) -> tuple[str, bool] | None:
    """None if the record at ``pos`` is valid, else (reason, could it be a torn tail).

    Only a problem in the final bytes of the file can come from an
    interrupted write; a bad record followed by more data is corruption.
    """
    end = len(buf)
    if end - pos < 8:
        return f"{end - pos} trailing bytes, shorter than a record header", True
    length, crc = _LEN_CRC.unpack_from(buf, pos)
    rec_end = pos + 8 + length
    if length == 0 and not any(buf[pos:]):
        return "zero-filled tail", True
    if length < _BODY_FIXED or length > MAX_RECORD_BYTES:
        return f"record length {length} out of range", rec_end >= end
    if rec_end > end:
        return f"record of {length} bytes cut short at end of file", True
    if crc32(memoryview(buf)[pos + 8 : rec_end]) != crc:
        return "CRC mismatch", rec_end == end
    index, term, typ = _IDX_TERM_TYPE.unpack_from(buf, pos + 8)
    if index != expected:
        return f"record index {index}, expected {expected}", False
    if term > MAX_TERM:
        # Written by an older version that adopted any term a peer sent.
        return f"record {index} has term {term}, past {MAX_TERM}", False
    if typ not in _ENTRY_TYPES:
        return f"unknown entry type {typ}", False
    return None
