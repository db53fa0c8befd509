"""The in-memory log: entries after the snapshot, and what storage already holds.

``handed`` is the last index given to the caller in a Ready (being or already
persisted), ``persisted`` the last index the caller confirmed with ``advance``.
A truncation below ``handed`` is remembered so the next Ready tells storage to
drop the same suffix.
"""

from __future__ import annotations

from mqcluster.raft.types import Entry


class RaftLog:
    def __init__(self, snapshot_index: int, snapshot_term: int, entries: list[Entry]) -> None:
        self.snapshot_index = snapshot_index
        self.snapshot_term = snapshot_term
        self._entries: list[Entry] = []
        for entry in entries:
            if entry.index <= snapshot_index:
                continue
            if entry.index != self.last_index + 1:
                raise ValueError(f"log gap: entry {entry.index} after {self.last_index}")
            self._entries.append(entry)
        self.handed = self.last_index
        self.persisted = self.last_index
        self.pending_truncate: int | None = None

    @property
    def last_index(self) -> int:
        return self._entries[-1].index if self._entries else self.snapshot_index

    @property
    def last_term(self) -> int:
        return self._entries[-1].term if self._entries else self.snapshot_term

    @property
    def first_index(self) -> int:
        return self.snapshot_index + 1

    def term_at(self, index: int) -> int | None:
        """The term of ``index``; None if compacted away (below the snapshot) or absent."""
        if index == self.snapshot_index:
            return self.snapshot_term
        if index < self.snapshot_index or index > self.last_index:
            return None
        return self._entries[index - self.snapshot_index - 1].term

    def entry(self, index: int) -> Entry:
        return self._entries[index - self.snapshot_index - 1]

    def slice(self, lo: int, hi: int) -> list[Entry]:
        """Entries lo..hi inclusive (clamped to what the log holds)."""
        lo = max(lo, self.first_index)
        hi = min(hi, self.last_index)
        if lo > hi:
            return []
        base = self.snapshot_index + 1
        return self._entries[lo - base : hi - base + 1]

    def batch(self, lo: int, max_entries: int, max_bytes: int) -> list[Entry]:
        """At least one entry from ``lo`` (if any), then up to the limits."""
        out: list[Entry] = []
        size = 0
        index = lo
        last = self.last_index
        while index <= last and len(out) < max_entries:
            entry = self.entry(index)
            if out and size + len(entry.data) > max_bytes:
                break
            out.append(entry)
            size += len(entry.data)
            index += 1
        return out

    def append(self, entry: Entry) -> None:
        if entry.index != self.last_index + 1:
            raise ValueError(f"append {entry.index} after {self.last_index}")
        self._entries.append(entry)

    def extend(self, entries: list[Entry]) -> None:
        """Append consecutive entries (``entries[i].index == entries[0].index + i``)."""
        if not entries:
            return
        first = self.last_index + 1
        for i, entry in enumerate(entries):
            if entry.index != first + i:
                raise ValueError(f"extend: entry {entry.index} where {first + i} belongs")
        self._entries.extend(entries)

    def truncate_from(self, index: int) -> None:
        """Drop entries with index >= ``index`` (never at or below the snapshot)."""
        if index <= self.snapshot_index:
            raise ValueError(f"truncate {index} at or below snapshot {self.snapshot_index}")
        if index > self.last_index:
            return
        del self._entries[index - self.snapshot_index - 1 :]
        if index <= self.handed:
            self.pending_truncate = (
                index if self.pending_truncate is None else min(self.pending_truncate, index)
            )
            self.handed = index - 1
        self.persisted = min(self.persisted, index - 1)

    def compact(self, index: int) -> None:
        """Drop the prefix up to ``index``, which a snapshot now covers."""
        term = self.term_at(index)
        if term is None or index <= self.snapshot_index:
            raise ValueError(f"cannot compact to {index}")
        del self._entries[: index - self.snapshot_index]
        self.snapshot_index = index
        self.snapshot_term = term

    def restore(self, index: int, term: int) -> bool:
        """Install a snapshot at (index, term); keep the suffix if it matches. True if kept."""
        keep = self.term_at(index) == term and index <= self.last_index
        if keep:
            del self._entries[: index - self.snapshot_index]
        else:
            if self.handed > index:  # storage holds entries the snapshot replaces
                self.pending_truncate = (
                    index + 1
                    if self.pending_truncate is None
                    else min(self.pending_truncate, index + 1)
                )
            self._entries = []
        self.snapshot_index = index
        self.snapshot_term = term
        self.handed = max(min(self.handed, self.last_index), index)
        self.persisted = min(self.persisted, self.handed)
        return keep

    def unstable(self) -> list[Entry]:
        return self.slice(self.handed + 1, self.last_index)
