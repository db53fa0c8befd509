"""Where a DLedger leader's next records land in every replica's commitlog.

Each replica writes an entry's records into its commitlog when it appends the entry
(``ha.dledger_log``), so every replica's commitlog ends where its Raft log's last
entry's records end. Once every entry of its log is applied (nothing it proposed is
still on its way into the log), the leader knows that end and each queue's next
offset from its own store; from then on it follows every proposal itself, and encodes
each write's records once, placed after the ones before (``store.built``), blank
records padding a segment's end as any append does (with the zeros after them: an
entry holds the commitlog's bytes exactly). What it places is gathered into
the region of the next entry (``take``). Anything it cannot follow (a refused
proposal, a new term) makes it start over from its store once the log is applied
again. Pure: the store is read through the callables it is given.
"""

from __future__ import annotations

from collections.abc import Callable

from mqcluster.store.batch import EncodedBatch
from mqcluster.store.built import BuiltBatch, build, placement
from mqcluster.store.codec import (
    END_FILE_MIN_BLANK_LENGTH,
    EncodedParts,
    consumes_queue_offset,
    encode,
    encode_blank,
)

NextQueueOffset = Callable[[str, int], int]


class EntryBuilder:
    def __init__(self) -> None:
        self._end: int | None = None
        self._queues: dict[tuple[str, int], int] = {}
        self._region_start = 0
        self._parts: list[bytes | memoryview] = []
        self._runs: list[BuiltBatch] = []

    @property
    def ready(self) -> bool:
        return self._end is not None

    @property
    def end(self) -> int:
        """Where the next records go, unless a segment's end is too near."""
        assert self._end is not None, "end before start_from()"
        return self._end

    @property
    def gathered(self) -> int:
        """Bytes placed since the last ``take``."""
        return 0 if self._end is None else self._end - self._region_start

    def start_from(self, commitlog_end: int) -> None:
        """Follow on from a store whose commitlog holds every entry of the log."""
        self._end = self._region_start = commitlog_end
        self._queues = {}
        self._parts, self._runs = [], []

    def reset(self) -> None:
        self._end = None
        self._queues = {}
        self._parts, self._runs = [], []

    def take(self) -> tuple[int, list[bytes | memoryview], list[BuiltBatch]]:
        """The region placed since the last ``take``: where it starts, its bytes, and
        the producer batches placed in it (what their consume-queue entries are)."""
        assert self._end is not None, "take before start_from()"
        start, parts, runs = self._region_start, self._parts, self._runs
        self._region_start, self._parts, self._runs = self._end, [], []
        return start, parts, runs

    def _put(self, start: int, records: bytes | memoryview) -> None:
        assert self._end is not None
        if start > self._end:  # the rest of the segment: a blank record, zeros after
            gap = start - self._end  # (less than these records: bounded by a batch)
            self._parts.append(encode_blank(gap) + bytes(gap - END_FILE_MIN_BLANK_LENGTH))
        self._parts.append(records)
        self._end = start + len(records)

    def _next_offset(self, topic: str, queue_id: int, next_queue_offset: NextQueueOffset) -> int:
        first = self._queues.get((topic, queue_id))
        if first is None:  # untouched since start_from: the store's own table holds it
            first = next_queue_offset(topic, queue_id)
        return first

    def place(self, enc: EncodedBatch, store_timestamp: int,
              next_queue_offset: NextQueueOffset, segment_size: int) -> BuiltBatch | None:
        """The batch's records placed after everything placed so far (its properties
        already carry their marks); None when no segment could hold it (nothing placed)."""
        assert self._end is not None, "place() before start_from()"
        b = enc.batch
        start = placement(self._end, sum(enc.sizes), segment_size)
        if start is None:
            return None
        first = self._next_offset(b.topic, b.queue_id, next_queue_offset)
        built = build(enc, start, first, store_timestamp)
        self._put(start, built.records)
        self._runs.append(built)
        self._queues[(b.topic, b.queue_id)] = first + len(enc.sizes)
        return built

    def place_record(self, parts: EncodedParts, store_timestamp: int,
                     next_queue_offset: NextQueueOffset,
                     segment_size: int) -> tuple[int, int] | None:
        """One message of any kind placed after everything placed so far: its commitlog
        offset and queue offset (0 for kinds that take none, as the store does); None
        when no segment could hold it."""
        assert self._end is not None, "place_record() before start_from()"
        start = placement(self._end, parts.size, segment_size)
        if start is None:
            return None
        rec = parts.rec
        queue_offset = 0
        if consumes_queue_offset(rec.sys_flag):
            queue_offset = self._next_offset(rec.topic, rec.queue_id, next_queue_offset)
            self._queues[(rec.topic, rec.queue_id)] = queue_offset + 1
        self._put(start, encode(parts, queue_offset, start, store_timestamp))
        return start, queue_offset
