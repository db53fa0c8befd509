"""The in-memory log: entries after the snapshot, and what storage already holds.

``handed`` is the last index given to the caller in a Ready (being or already
persisted), ``persisted`` the last index the caller confirmed with ``advance``.
A truncation below ``handed`` is remembered so the next Ready tells storage to
drop the same suffix.

Entries are kept as three parallel lists (terms, types, data) rather than as
Entry objects: ints, enum members and bytes add nothing to the work of the
cyclic garbage collector, whose full collections would otherwise walk every
entry of a long log and show up as commit-latency spikes. Only the newest
entries (``hot_entries`` to twice that), which are persisted, pushed to
followers and applied right after they arrive, are also kept as objects; older
ones are built when asked for.

With a ``load`` function (storage's reader) and ``max_cached_bytes``, the data of
entries that are durable and applied (``release``) is dropped, oldest first, once
the data kept passes that size, and read back from storage when asked for again (a
follower far behind): a state machine with no snapshots (a DLedger commitlog) must
not keep its whole log in memory.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable
from typing import cast

from mqcluster.raft.types import Entry, EntryType, StoredEntries

HOT_ENTRIES = 4096
LoadFn = Callable[[int, int], list[Entry]]
"""Entries lo..hi (inclusive) from storage."""


class MemoryLog:
    def __init__(
        self,
        snapshot_index: int,
        snapshot_term: int,
        entries: list[Entry],
        hot_entries: int = HOT_ENTRIES,
        load: LoadFn | None = None,
        max_cached_bytes: int | None = None,
        stored: StoredEntries | None = None,
    ) -> None:
        """``stored``: entries known by term, type and size only, their data to be
        read with ``load`` (they come before ``entries``)."""
        self.snapshot_index = snapshot_index
        self.snapshot_term = snapshot_term
        self._terms: list[int] = []
        self._types: list[EntryType] = []
        self._data: list[bytes | None] = []  # None: dropped, in storage only
        self._sizes = array("Q")
        self._load = load
        self._max_cached = max_cached_bytes if load is not None else None
        self.cached_bytes = 0
        self._dropped_to = snapshot_index  # data of every entry up to here is dropped
        self._hot_entries = max(1, hot_entries)
        self._hot: list[Entry] = []  # the entries from index ``_hot_first`` to the last
        self._hot_first = snapshot_index + 1
        if stored is not None and stored.terms:
            if load is None:
                raise ValueError("entries without data need a load function")
            skip = snapshot_index + 1 - stored.first_index
            if skip < 0:
                raise ValueError(f"log gap: entry {stored.first_index} after {snapshot_index}")
            self._terms.extend(stored.terms[skip:])
            self._types.extend(EntryType(t) for t in stored.types[skip:])
            self._sizes.extend(stored.sizes[skip:])
            self._data.extend([None] * len(self._terms))
            self._dropped_to = self.last_index
            self._hot_first = self.last_index + 1
        for entry in entries:
            if entry.index <= snapshot_index:
                continue
            if entry.index != self.last_index + 1:
                raise ValueError(f"log gap: entry {entry.index} after {self.last_index}")
            self._push(entry)
        self.handed = self.last_index
        self.persisted = self.last_index
        self.pending_truncate: int | None = None

    def _push(self, entry: Entry) -> None:
        self._terms.append(entry.term)
        self._types.append(entry.type)
        self._data.append(entry.data)
        self._sizes.append(len(entry.data))
        self.cached_bytes += len(entry.data)
        hot = self._hot
        hot.append(entry)
        if len(hot) >= 2 * self._hot_entries:
            cold = len(hot) - self._hot_entries
            del hot[:cold]
            self._hot_first += cold

    def _cold(self, lo: int, hi: int) -> list[Entry]:
        """Entries lo..hi (all older than the hot ones), built from the lists."""
        base = self.snapshot_index + 1
        if lo <= self._dropped_to:
            stored = min(hi, self._dropped_to)
            return self._read(lo, stored) + (self._cold(stored + 1, hi) if hi > stored else [])
        terms, types = self._terms, self._types
        data = cast(list[bytes], self._data)  # none dropped past ``_dropped_to``
        return [
            Entry(index, terms[index - base], types[index - base], data[index - base])
            for index in range(lo, hi + 1)
        ]

    def _read(self, lo: int, hi: int) -> list[Entry]:
        """Dropped entries lo..hi, back from storage (which must hold them as they were)."""
        assert self._load is not None
        got = self._load(lo, hi)
        base = self.snapshot_index + 1
        if len(got) != hi - lo + 1 or any(
            e.index != i or e.term != self._terms[i - base] for i, e in enumerate(got, lo)
        ):
            raise RuntimeError(f"storage does not hold entries {lo}..{hi} as logged")
        return got

    def indexes_of(self, kind: EntryType) -> list[int]:
        base = self.snapshot_index + 1
        return [base + i for i, t in enumerate(self._types) if t == kind]

    def release(self, upto: int) -> None:
        """Entries up to ``upto`` are durable and applied: their data may be dropped
        (oldest first) while more than ``max_cached_bytes`` is kept."""
        limit = self._max_cached
        if limit is None or self.cached_bytes <= limit:
            return
        base = self.snapshot_index + 1
        upto = min(upto, self.last_index)
        data, sizes = self._data, self._sizes
        index = self._dropped_to
        while index < upto and self.cached_bytes > limit:
            index += 1
            data[index - base] = None
            self.cached_bytes -= sizes[index - base]
        self._dropped_to = index
        if index >= self._hot_first:  # hot entries hold their data too
            del self._hot[: index - self._hot_first + 1]
            self._hot_first = index + 1

    def _drop_prefix(self, count: int) -> None:
        """Forget the first ``count`` entries (the snapshot index moves up by as many)."""
        self.cached_bytes -= sum(len(d) for d in self._data[:count] if d is not None)
        del self._terms[:count]
        del self._types[:count]
        del self._data[:count]
        del self._sizes[:count]
        first = self.snapshot_index + count + 1
        self._dropped_to = max(self._dropped_to, first - 1)
        if first > self._hot_first:
            del self._hot[: first - self._hot_first]
            self._hot_first = first

    @property
    def last_index(self) -> int:
        return self.snapshot_index + len(self._terms)

    @property
    def last_term(self) -> int:
        return self._terms[-1] if self._terms else self.snapshot_term

    @property
    def first_index(self) -> int:
        return self.snapshot_index + 1

    def term_at(self, index: int) -> int | None:
        """The term of ``index``; None if compacted away (below the snapshot) or absent."""
        if index == self.snapshot_index:
            return self.snapshot_term
        if index < self.snapshot_index or index > self.last_index:
            return None
        return self._terms[index - self.snapshot_index - 1]

    def entry(self, index: int) -> Entry:
        if not self.snapshot_index < index <= self.last_index:
            raise IndexError(f"entry {index} is not in the log")
        if index >= self._hot_first:
            return self._hot[index - self._hot_first]
        return self._cold(index, index)[0]

    def slice(self, lo: int, hi: int) -> list[Entry]:
        """Entries lo..hi inclusive (clamped to what the log holds)."""
        lo = max(lo, self.first_index)
        hi = min(hi, self.last_index)
        if lo > hi:
            return []
        hot_first = self._hot_first
        if lo >= hot_first:
            return self._hot[lo - hot_first : hi - hot_first + 1]
        if hi < hot_first:
            return self._cold(lo, hi)
        return self._cold(lo, hot_first - 1) + self._hot[: hi - hot_first + 1]

    def batch(self, lo: int, max_entries: int, max_bytes: int) -> list[Entry]:
        """At least one entry from ``lo`` (if any), then up to the limits."""
        lo = max(lo, self.first_index)
        base = self.snapshot_index + 1
        end = min(self.last_index, lo + max_entries - 1)
        sizes = self._sizes
        size = 0
        hi = lo - 1
        for index in range(lo, end + 1):
            length = sizes[index - base]
            if index > lo and size + length > max_bytes:
                break
            size += length
            hi = index
        return self.slice(lo, hi)

    def append(self, entry: Entry) -> None:
        if entry.index != self.last_index + 1:
            raise ValueError(f"append {entry.index} after {self.last_index}")
        self._push(entry)

    def extend(self, entries: Iterable[Entry]) -> None:
        """Append consecutive entries (``entries[i].index == entries[0].index + i``)."""
        batch = list(entries)
        first = self.last_index + 1
        for i, entry in enumerate(batch):
            if entry.index != first + i:
                raise ValueError(f"extend: entry {entry.index} where {first + i} belongs")
        for entry in batch:
            self._push(entry)

    def truncate_from(self, index: int) -> None:
        """Drop entries with index >= ``index`` (never at or below the snapshot)."""
        if index <= self.snapshot_index:
            raise ValueError(f"truncate {index} at or below snapshot {self.snapshot_index}")
        if index > self.last_index:
            return
        keep = index - self.snapshot_index - 1
        self.cached_bytes -= sum(len(d) for d in self._data[keep:] if d is not None)
        del self._terms[keep:]
        del self._types[keep:]
        del self._data[keep:]
        del self._sizes[keep:]
        self._dropped_to = min(self._dropped_to, index - 1)
        if index > self._hot_first:
            del self._hot[index - self._hot_first :]
        else:
            self._hot = []
            self._hot_first = index
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
        self._drop_prefix(index - self.snapshot_index)
        self.snapshot_index = index
        self.snapshot_term = term

    def restore(self, index: int, term: int) -> bool:
        """Install a snapshot at (index, term); keep the suffix if it matches. True if kept."""
        keep = self.term_at(index) == term and index <= self.last_index
        if keep:
            self._drop_prefix(index - self.snapshot_index)
        else:
            if self.handed > index:  # storage holds entries the snapshot replaces
                self.pending_truncate = (
                    index + 1
                    if self.pending_truncate is None
                    else min(self.pending_truncate, index + 1)
                )
            self._terms, self._types, self._data = [], [], []
            self._sizes, self.cached_bytes = array("Q"), 0
            self._hot, self._hot_first = [], index + 1
        self.snapshot_index = index
        self.snapshot_term = term
        self._dropped_to = max(self._dropped_to, index)
        self.handed = max(min(self.handed, self.last_index), index)
        self.persisted = min(self.persisted, self.handed)
        return keep

    def unstable(self) -> list[Entry]:
        return self.slice(self.handed + 1, self.last_index)
