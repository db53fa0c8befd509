"""Batches whose records were encoded before their append, at an agreed position.

A DLedger leader encodes a producer batch's commitlog records once, at the commitlog
offset and queue offsets every replica has reached when it has appended the entries
before (``placement``: a batch never straddles a segment's end); each replica writes
those bytes as they are, when it appends the entry (``ha.dledger_log``). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

from mqcluster.store.batch import EncodedBatch, encode_records
from mqcluster.store.codec import END_FILE_MIN_BLANK_LENGTH


@dataclass(slots=True)
class BuiltBatch:
    """One queue's records, encoded for commitlog offset ``start`` onwards."""

    topic: str
    queue_id: int
    first_queue_offset: int
    start: int
    sizes: list[int]
    tags_codes: list[int]
    records: bytes | memoryview
    store_timestamp: int

    @property
    def offsets(self) -> list[int]:
        return list(accumulate(self.sizes[:-1], initial=self.start))

    @property
    def end(self) -> int:
        return self.start + len(self.records)


def placement(end: int, total: int, segment_size: int) -> int | None:
    """Where ``total`` bytes of records go when the commitlog ends at ``end``: right
    there, or at the next segment's start when they do not fit in the room left (a
    blank record pads it, as for any append); None when no segment could hold them."""
    if total + END_FILE_MIN_BLANK_LENGTH > segment_size:
        return None
    used = end % segment_size
    if used + total + END_FILE_MIN_BLANK_LENGTH <= segment_size:
        return end
    return end - used + segment_size


def build(enc: EncodedBatch, start: int, first_queue_offset: int,
          store_timestamp: int) -> BuiltBatch:
    """The batch's records, placed from ``start`` (which ``placement`` chose)."""
    sizes = enc.sizes
    offsets = list(accumulate(sizes[:-1], initial=start))
    parts = encode_records(enc, 0, len(sizes), first_queue_offset, offsets, store_timestamp)
    b = enc.batch
    return BuiltBatch(b.topic, b.queue_id, first_queue_offset, start, sizes, b.tags_codes,
                      b"".join(parts), store_timestamp)
