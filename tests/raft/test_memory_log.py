import gc
from array import array

import pytest

from mqcluster.raft.memory_log import MemoryLog
from mqcluster.raft.types import Entry, EntryType, StoredEntries


def entries(lo: int, hi: int, term: int = 1, size: int = 10) -> list[Entry]:
    return [Entry(i, term, EntryType.NORMAL, bytes([i % 256]) * size) for i in range(lo, hi + 1)]


def test_slice_and_entry_give_back_what_was_appended() -> None:
    log = MemoryLog(0, 0, entries(1, 5))
    log.append(Entry(6, 2, EntryType.CONFIG, b"cfg"))
    assert log.slice(1, 6) == [*entries(1, 5), Entry(6, 2, EntryType.CONFIG, b"cfg")]
    assert log.entry(6).type is EntryType.CONFIG
    assert (log.last_index, log.last_term) == (6, 2)
    with pytest.raises(IndexError):
        log.entry(7)


def test_append_and_extend_refuse_gaps() -> None:
    log = MemoryLog(0, 0, entries(1, 3))
    with pytest.raises(ValueError, match="append 5 after 3"):
        log.append(entries(5, 5)[0])
    with pytest.raises(ValueError, match="where 4 belongs"):
        log.extend(entries(5, 6))
    assert log.last_index == 3


def test_batch_takes_at_least_one_entry_then_stops_at_the_byte_limit() -> None:
    log = MemoryLog(0, 0, entries(1, 10, size=100))
    assert [e.index for e in log.batch(3, 100, 250)] == [3, 4]
    assert [e.index for e in log.batch(3, 100, 10)] == [3]  # one even over the limit
    assert [e.index for e in log.batch(8, 2, 10_000)] == [8, 9]
    assert log.batch(11, 5, 10_000) == []


def test_truncate_below_handed_is_remembered_for_storage() -> None:
    log = MemoryLog(0, 0, entries(1, 5))
    log.truncate_from(4)
    assert log.last_index == 3
    assert (log.pending_truncate, log.handed, log.persisted) == (4, 3, 3)
    log.extend(entries(4, 6, term=2))
    assert log.unstable() == entries(4, 6, term=2)


def test_compact_and_restore_keep_terms_and_the_matching_suffix() -> None:
    log = MemoryLog(0, 0, [*entries(1, 4), *entries(5, 8, term=2)])
    log.compact(5)
    assert (log.first_index, log.snapshot_term, log.term_at(5), log.term_at(4)) == (6, 2, 2, None)
    assert log.restore(7, 2)  # matches: the tail is kept
    assert log.slice(1, 100) == entries(8, 8, term=2)
    assert not log.restore(20, 3)  # beyond the log: everything goes
    assert (log.last_index, log.last_term, log.slice(1, 100)) == (20, 3, [])


def test_only_the_newest_entries_are_objects_for_the_garbage_collector_to_walk() -> None:
    # Full collections walk every tracked object; a log of Entry objects made
    # their pauses grow with the log and showed up as commit-latency spikes.
    log = MemoryLog(0, 0, [], hot_entries=100)
    batch = entries(1, 20_000)
    gc.collect()
    before = len(gc.get_objects())
    log.extend(batch)
    del batch
    gc.collect()
    assert len(gc.get_objects()) - before < 250
    assert log.slice(1, 20_000) == entries(1, 20_000)  # old entries are rebuilt on demand


@pytest.mark.parametrize("cut", [1, 150, 199, 200, 201, 290, 300])
def test_hot_window_follows_truncate_compact_and_restore(cut: int) -> None:
    log = MemoryLog(0, 0, entries(1, 300), hot_entries=64)
    whole = entries(1, 300)
    log.truncate_from(cut)
    assert log.slice(1, 400) == whole[: cut - 1]
    log.extend(entries(cut, 310, term=2))
    expected = [*whole[: cut - 1], *entries(cut, 310, term=2)]
    assert log.slice(1, 400) == expected
    log.compact(min(cut, 250))
    assert log.slice(1, 400) == expected[min(cut, 250) :]
    assert [log.entry(i) for i in range(log.first_index, 311)] == expected[min(cut, 250) :]
    assert log.restore(305, log.term_at(305) or 0)
    assert log.slice(1, 400) == expected[305:]


class Storage:
    """What a log file holds, and how often it is read."""

    def __init__(self, stored: list[Entry]) -> None:
        self.by_index = {e.index: e for e in stored}
        self.reads: list[tuple[int, int]] = []

    def load(self, lo: int, hi: int) -> list[Entry]:
        self.reads.append((lo, hi))
        return [self.by_index[i] for i in range(lo, hi + 1)]


def test_applied_entries_leave_memory_past_the_limit_and_come_back_from_storage() -> None:
    stored = entries(1, 40, size=100)
    disk = Storage(stored)
    log = MemoryLog(0, 0, [], hot_entries=4, load=disk.load, max_cached_bytes=1000)
    log.extend(stored)
    log.persisted = 40
    log.release(25)  # only what is applied may go
    assert log.cached_bytes == 1500  # entries 26..40
    log.release(40)
    assert log.cached_bytes == 1000  # the newest ten
    assert disk.reads == []
    assert log.slice(1, 40) == stored  # 1..30 read back in one go
    assert disk.reads == [(1, 30)]
    assert log.entry(3) == stored[2]
    assert [e.index for e in log.batch(29, 3, 10_000)] == [29, 30, 31]  # sizes still known
    log.truncate_from(38)
    log.extend(entries(38, 39, term=2, size=100))
    assert log.slice(36, 39) == [*stored[35:37], *entries(38, 39, term=2, size=100)]
    assert log.cached_bytes == 900  # 31..39


def test_storage_that_disagrees_with_the_log_is_an_error_not_a_wrong_entry() -> None:
    stored = entries(1, 10, size=100)
    log = MemoryLog(0, 0, stored, load=Storage(entries(1, 10, term=2)).load,
                  max_cached_bytes=100)
    log.persisted = 10
    log.release(10)
    with pytest.raises(RuntimeError, match=r"does not hold entries 1\.\.9"):
        log.slice(1, 9)


def test_without_storage_every_entry_stays() -> None:
    log = MemoryLog(0, 0, entries(1, 10, size=100), max_cached_bytes=100)
    log.release(10)
    assert log.cached_bytes == 1000 and log.slice(1, 10) == entries(1, 10, size=100)


def test_a_log_can_start_from_what_storage_describes_and_read_data_when_asked() -> None:
    stored = [*entries(1, 5, size=100), Entry(6, 1, EntryType.CONFIG, b"cfg"),
              *entries(7, 9, term=2, size=100)]
    disk = Storage(stored)
    described = StoredEntries(1, array("Q", [e.term for e in stored]),
                              array("B", [int(e.type) for e in stored]),
                              array("Q", [len(e.data) for e in stored]))
    log = MemoryLog(0, 0, [], load=disk.load, max_cached_bytes=1000, stored=described)
    assert (log.last_index, log.last_term, log.cached_bytes) == (9, 2, 0)
    assert log.indexes_of(EntryType.CONFIG) == [6]
    assert disk.reads == []
    assert [e.index for e in log.batch(2, 100, 250)] == [2, 3]  # sizes known up front
    assert log.slice(1, 9) == stored
    log.append(Entry(10, 2, EntryType.NORMAL, b"new"))
    assert log.slice(9, 10) == [stored[-1], Entry(10, 2, EntryType.NORMAL, b"new")]
    assert log.cached_bytes == 3


def test_entries_without_data_need_storage_to_read_it_from() -> None:
    with pytest.raises(ValueError, match="need a load function"):
        MemoryLog(0, 0, [], stored=StoredEntries(1, array("Q", [1]), array("B", [0]),
                                                 array("Q", [3])))
