"""The Raft log of a DLedger group member, whose messages live in the commitlog only.

The layout and the recovery rules: docs/formats.md, "DLedger Raft directory". An entry
of commitlog bytes (``ha.dledger_entry``) is written into the broker's commitlog at its
``regionStart`` when it is appended, before it commits; the Raft log's record keeps a
reference to the bytes (with their CRC) instead of the bytes. The commitlog's bytes
are fsynced before the records that refer to them. At start (after the store's own
recovery) entries at the end whose bytes a crash left missing or torn are cut, then
commitlog bytes no entry refers to; an older release's log (``<root>/log``) is refused
with one line. Truncating the log (a follower's uncommitted suffix) cuts the commitlog
back to the end of the last entry kept; entries read back (for a follower further
behind than the in-memory ones) are put together from the commitlog again.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from mqcluster.common.crc import crc32
from mqcluster.common.files import atomic_write
from mqcluster.ha.dledger_entry import (
    REGION_HEAD_SIZE,
    decode_runs,
    encode_region,
    split_entry,
)
from mqcluster.raft.disk_log import (
    DEFAULT_SEGMENT_BYTES,
    CorruptLogError,
    DiskLog,
    LoadedState,
    PendingSync,
)
from mqcluster.raft.diskformat import RaftStoreError
from mqcluster.raft.types import Entry
from mqcluster.store.built import BuiltBatch

log = logging.getLogger(__name__)

_REF = struct.Struct(">cqII")  # "R", regionStart, regionLength, regionCrc32
_REF_TAG = b"R"
_WHOLE_TAG = b"V"
BASE_FILE = "commitlog-base"
OLD_LOG_DIR = "log"


class Commitlog(Protocol):
    """What the log needs of the broker's store (``store.api.MessageStore``)."""

    @property
    def commitlog_max_offset(self) -> int: ...

    @property
    def commitlog_min_offset(self) -> int: ...

    def append_replicated(self, offset: int, data: bytes | memoryview,
                          batches: Sequence[BuiltBatch] | None = None) -> bool: ...

    def read_commitlog(self, offset: int, max_bytes: int) -> bytes: ...

    def cut_commitlog(self, offset: int) -> None: ...

    def commitlog_syncer(self, start: int, end: int) -> Callable[[], None]: ...


@dataclass(frozen=True)
class _Sync(PendingSync):
    commitlog: Callable[[], None] = lambda: None


class DLedgerLog(DiskLog):
    LOG_DIR = "index"

    def __init__(self, root: str | Path, commitlog: Commitlog, *,
                 segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> None:
        root = Path(root)
        old = root / OLD_LOG_DIR
        if old.is_dir() and any(old.glob("*.seg")):
            raise RaftStoreError(
                f"{old} is the DLedger log of an older release (whole messages in the Raft "
                f"log); this release keeps them in the commitlog only and cannot read it: "
                f"run the older release, or start this replica on an empty store")
        self._cl = commitlog
        super().__init__(root, segment_bytes=segment_bytes)
        base_path = self.root / BASE_FILE
        if base_path.exists():
            self._base = int(base_path.read_text())
        elif self.last_index == 0 and commitlog.commitlog_max_offset == 0:
            self._base = 0
            atomic_write(base_path, b"0")
        else:
            raise RaftStoreError(
                f"{self.root} has no {BASE_FILE} and the commitlog holds "
                f"{commitlog.commitlog_max_offset} bytes: not a DLedger store of this release")
        self._reconcile()
        self._synced_to = commitlog.commitlog_max_offset

    # ---- start -------------------------------------------------------------------

    def _reconcile(self) -> None:
        """Cut what a crash left half written: index entries whose commitlog bytes are
        missing or torn, then commitlog bytes no entry refers to."""
        cut_from: int | None = None
        end = self._base
        for index in range(self.last_index, self.first_index - 1, -1):
            ref = self._ref(index)
            if ref is None:
                continue
            start, length, crc = ref
            if self._intact(start, length, crc):
                end = start + length
                break
            cut_from = index
        if cut_from is not None:
            log.warning("DLedger log %s: entries %d..%d refer to commitlog bytes a crash "
                        "left missing or torn; cutting them (never acknowledged)",
                        self.root, cut_from, self.last_index)
            super().truncate_from(cut_from)
        have = self._cl.commitlog_max_offset
        if have > end:
            log.warning("DLedger log %s: commitlog bytes %d..%d belong to no entry (written "
                        "before a crash, never acknowledged); cutting them", self.root, end,
                        have)
            self._cl.cut_commitlog(end)

    def _stored(self, index: int) -> bytes:
        return super().entries(index, index + 1)[0].data

    def _ref(self, index: int) -> tuple[int, int, int] | None:
        data = self._stored(index)
        if data[:1] != _REF_TAG:
            return None
        _, start, length, crc = _REF.unpack_from(data)
        return start, length, crc

    def _read(self, start: int, length: int) -> bytes | None:
        out: list[bytes] = []
        pos, end = start, start + length
        if end > self._cl.commitlog_max_offset:
            return None
        while pos < end:
            chunk = self._cl.read_commitlog(pos, end - pos)
            if not chunk:
                return None
            out.append(chunk)
            pos += len(chunk)
        return b"".join(out)

    def _intact(self, start: int, length: int, crc: int) -> bool:
        data = self._read(start, length)
        return data is not None and crc32(data) == crc

    # ---- writes ------------------------------------------------------------------

    def append(self, entries: Sequence[Entry], records: bytes | None = None, *,
               sync: bool = True) -> None:
        """Write each entry's commitlog bytes where they go, then the index records
        (``records``, the entries as the wire carries them, is not what is stored)."""
        if not entries:
            return
        if entries[0].index <= self.last_index:
            self.truncate_from(entries[0].index)
        stored: list[Entry] = []
        cl = self._cl
        for e in entries:
            parts = split_entry(e.data)
            if parts is None:
                stored.append(Entry(e.index, e.term, e.type, _WHOLE_TAG + e.data))
                continue
            start, runs, region = parts
            if not cl.append_replicated(start, region, decode_runs(runs)):
                raise CorruptLogError(self.log_dir, 0, f"entry {e.index} goes at commitlog "
                                      f"offset {start}, the commitlog ends at "
                                      f"{cl.commitlog_max_offset}")
            stored.append(Entry(e.index, e.term, e.type, _REF.pack(
                _REF_TAG, start, len(region), crc32(region)) + runs))
        super().append(stored, None, sync=sync)

    def truncate_from(self, index: int) -> None:
        """Drop entries from ``index`` on and their commitlog bytes."""
        if index > self.last_index:
            return
        end = self._base
        for i in range(index - 1, self.first_index - 1, -1):
            ref = self._ref(i)
            if ref is not None:
                end = ref[0] + ref[1]
                break
        super().truncate_from(index)
        if self._cl.commitlog_max_offset > end:
            self._cl.cut_commitlog(end)
        self._synced_to = min(self._synced_to, end)

    def _fsync_tail(self, end: int) -> None:
        self._commitlog_syncer()()
        super()._fsync_tail(end)

    def _commitlog_syncer(self) -> Callable[[], None]:
        """What fsyncs the commitlog bytes written since the last one (taken on the
        writer's thread, run on any)."""
        have = self._cl.commitlog_max_offset
        syncer = self._cl.commitlog_syncer(self._synced_to, have)
        self._synced_to = have
        return syncer

    def begin_sync(self) -> PendingSync | None:
        pending = super().begin_sync()
        if pending is None:
            return None
        return _Sync(pending.fd, pending.size, pending.dropped_to, self._commitlog_syncer())

    def sync_descriptor(self, pending: PendingSync) -> None:
        """The commitlog's bytes first: an index record on disk means its bytes are."""
        if isinstance(pending, _Sync):
            try:
                pending.commitlog()
            except BaseException:
                os.close(pending.fd)  # (the index is not fsynced: its bytes may not be)
                raise
        super().sync_descriptor(pending)

    # ---- reads -------------------------------------------------------------------

    def load(self, *, with_data: bool = True) -> LoadedState:
        """As ``DiskLog.load``; without data, each entry's size is that of its data as
        it is read back (what batches of pushes are measured by), not its record's."""
        state = super().load(with_data=with_data)
        if state.stored is not None:
            sizes = state.stored.sizes
            for i, e in enumerate(super().entries(state.stored.first_index)):
                sizes[i] = (len(e.data) - 1 if e.data[:1] == _WHOLE_TAG else
                            REGION_HEAD_SIZE + len(e.data) - _REF.size
                            + _REF.unpack_from(e.data)[2])
        return state

    def entries(self, lo: int, hi: int | None = None) -> list[Entry]:
        return [self._whole(e) for e in super().entries(lo, hi)]

    def _whole(self, e: Entry) -> Entry:
        data = e.data
        if data[:1] == _WHOLE_TAG:
            return Entry(e.index, e.term, e.type, data[1:])
        _, start, length, crc = _REF.unpack_from(data)
        if start < self._cl.commitlog_min_offset < self._cl.commitlog_max_offset:
            # Retention deleted its segment (dispatched long ago): what a restart applies
            # again needs only where it goes, and no follower can be sent it any more.
            return Entry(e.index, e.term, e.type, encode_region(start, []))
        region = self._read(start, length)
        if region is None or crc32(region) != crc:
            raise CorruptLogError(self.log_dir, 0, f"entry {e.index}: its commitlog bytes "
                                  f"{start}..{start + length} are missing or damaged")
        return Entry(e.index, e.term, e.type,
                     encode_region(start, [region], bytes(data[_REF.size:])))
