"""The epoch file of controller mode (RIP-44): the entries (``mqcluster.protocol.epochs``)
in memory, persisted atomically after every change (docs/formats.md, "Epoch file").
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_right

from mqcluster.common.files import atomic_write, read_file
from mqcluster.protocol.epochs import OPEN_END, EpochEntry, EpochFileError, decode, encode

log = logging.getLogger(__name__)

class EpochFileCache:
    """Epoch entries in memory, persisted after every change (``EpochFileCache``)."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._starts: list[tuple[int, int]] = []
        self._last_end = OPEN_END

    @classmethod
    def load(cls, path: str) -> EpochFileCache:
        cache = cls(path)
        for candidate in (path, path + ".bak"):
            raw = read_file(candidate)
            if raw is None:
                continue
            try:
                cache._starts = decode(raw)
                return cache
            except (EpochFileError, ValueError) as exc:
                log.error("epoch file %s unreadable (%s); trying its backup", candidate, exc)
        return cache

    @classmethod
    def from_entries(cls, entries: list[EpochEntry]) -> EpochFileCache:
        cache = cls()
        cache._starts = [(e.epoch, e.start_offset) for e in entries]
        if entries:
            cache._last_end = entries[-1].end_offset
        return cache

    # queries
    @property
    def entries(self) -> list[EpochEntry]:
        with self._lock:
            out = []
            for i, (epoch, start) in enumerate(self._starts):
                end = self._starts[i + 1][1] if i + 1 < len(self._starts) else self._last_end
                out.append(EpochEntry(epoch, start, end))
            return out

    @property
    def last_entry(self) -> EpochEntry | None:
        entries = self.entries
        return entries[-1] if entries else None

    @property
    def last_epoch(self) -> int:
        with self._lock:
            return self._starts[-1][0] if self._starts else 0

    def get_entry(self, epoch: int) -> EpochEntry | None:
        return next((e for e in self.entries if e.epoch == epoch), None)

    def next_entry(self, epoch: int) -> EpochEntry | None:
        return next((e for e in self.entries if e.epoch > epoch), None)

    def find_epoch_by_offset(self, offset: int) -> EpochEntry | None:
        entries = self.entries
        i = bisect_right([e.start_offset for e in entries], offset) - 1
        if i >= 0 and entries[i].contains(offset):
            return entries[i]
        return None

    def set_last_end_offset(self, offset: int) -> None:
        """Close the last entry at the commitlog's max offset (``OPEN_END`` to reopen)."""
        with self._lock:
            self._last_end = offset

    # changes
    def append(self, epoch: int, start_offset: int) -> bool:
        """Add a new master term; ``False`` if it would go backwards."""
        with self._lock:
            if self._starts:
                last_epoch, last_start = self._starts[-1]
                if (epoch, start_offset) == (last_epoch, last_start):
                    return True
                if epoch <= last_epoch or start_offset < last_start:
                    return False
                if start_offset == last_start:
                    # The last epoch holds no message. The other replicas learn an epoch
                    # only from its messages, so it goes: every file stays the same.
                    self._starts.pop()
            self._starts.append((epoch, start_offset))
            self._last_end = OPEN_END
            self._persist()
            return True

    def truncate_suffix_by_epoch(self, epoch: int) -> None:
        """Remove every entry of ``epoch`` and later."""
        with self._lock:
            self._starts = [p for p in self._starts if p[0] < epoch]
            self._last_end = OPEN_END
            self._persist()

    def truncate_suffix_by_offset(self, offset: int) -> None:
        """The commitlog was cut at ``offset``: drop terms starting at or after it."""
        with self._lock:
            self._starts = [p for p in self._starts if p[1] < offset]
            self._last_end = OPEN_END
            self._persist()

    def truncate_prefix_by_offset(self, offset: int) -> None:
        """Old segments below ``offset`` were deleted: drop terms that ended before it."""
        with self._lock:
            entries = self.entries
            keep = [e for e in entries if e.end_offset > offset]
            self._starts = [(e.epoch, max(e.start_offset, offset)) for e in keep]
            self._persist()

    def _persist(self) -> None:
        if self.path is None:
            return
        current = read_file(self.path)
        if current is not None:
            atomic_write(self.path + ".bak", current)
        atomic_write(self.path, encode([EpochEntry(e, s) for e, s in self._starts]))


def find_consistent_point(local: EpochFileCache, master: EpochFileCache) -> int:
    """RIP-44 truncation point: walking local terms newest first, the first term the
    master has with the same start offset gives ``min(local end, master end)``; -1 if none.
    """
    for entry in reversed(local.entries):
        theirs = master.get_entry(entry.epoch)
        if theirs is not None and theirs.start_offset == entry.start_offset:
            return min(entry.end_offset, theirs.end_offset)
    return -1
