"""Where a DLedger leader's next batch lands in every replica's commitlog.

Once every entry of its log is applied, a leader knows the commitlog end and the
queue offsets each replica will have after applying whatever it proposes next, as
long as it proposes every entry itself and knows each one's size. It then encodes a
producer batch's records once, at that place (``store.built``), and every replica
writes them as they are. Anything it cannot follow (an entry of another layout, a
refused proposal, a new term) makes it start over from its own store once the log is
applied again. Pure: the store is read through the callables it is given.
"""

from __future__ import annotations

from collections.abc import Callable

from mqcluster.ha.dledger_entry import BuiltEntry
from mqcluster.store.batch import EncodedBatch
from mqcluster.store.built import build, placement


class EntryBuilder:
    def __init__(self) -> None:
        self._end: int | None = None
        self._queues: dict[tuple[str, int], int] = {}

    @property
    def ready(self) -> bool:
        return self._end is not None

    def start_from(self, commitlog_end: int) -> None:
        """Follow on from a store that has applied every entry of the log."""
        self._end = commitlog_end
        self._queues = {}

    def reset(self) -> None:
        self._end = None
        self._queues = {}

    def place(self, enc: EncodedBatch, index: int, store_timestamp: int, store_host: str,
              next_queue_offset: Callable[[str, int], int], segment_size: int,
              first_position: int = 0) -> BuiltEntry | None:
        """The batch's records placed after everything proposed so far, as messages
        ``first_position`` on of entry ``index`` (its properties already carry those
        marks); None when no segment could hold it (the leader stops following: see
        ``reset``)."""
        assert self._end is not None, "place() before start_from()"
        b = enc.batch
        total = sum(enc.sizes)
        start = placement(self._end, total, segment_size)
        if start is None:
            return None
        key = (b.topic, b.queue_id)
        first = self._queues.get(key)
        if first is None:  # untouched since start_from: the store's own table holds it
            first = next_queue_offset(b.topic, b.queue_id)
        built = build(enc, start, first, store_timestamp)
        self._end = start + total
        self._queues[key] = first + len(enc.sizes)
        return BuiltEntry(index, store_host, b.born_host, b.born_timestamp, b.sys_flag,
                          b.reconsume_times, list(b.flags), built, first_position)
