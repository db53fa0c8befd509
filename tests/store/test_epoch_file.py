from __future__ import annotations

from pathlib import Path

from mqcluster.protocol.epochs import OPEN_END, EpochEntry
from mqcluster.store.epoch_file import EpochFileCache, find_consistent_point


def cache(pairs: list[tuple[int, int]], end: int) -> EpochFileCache:
    c = EpochFileCache()
    for epoch, start in pairs:
        assert c.append(epoch, start)
    c.set_last_end_offset(end)
    return c


def test_append_persist_and_reload(tmp_path: Path) -> None:
    path = str(tmp_path / "epochFileCheckpoint")
    c = EpochFileCache.load(path)
    assert c.last_epoch == 0 and c.last_entry is None
    assert c.append(1, 0) and c.append(2, 900) and c.append(2, 900)
    assert not c.append(2, 1000) and not c.append(3, 800)
    again = EpochFileCache.load(path)
    assert again.entries == [EpochEntry(1, 0, 900), EpochEntry(2, 900, OPEN_END)]
    assert again.last_epoch == 2


def test_an_epoch_without_messages_is_replaced_by_the_next(tmp_path: Path) -> None:
    """A master elected twice with no write in between: its replicas never see the empty
    epoch, so neither does its own file."""
    path = str(tmp_path / "epochFileCheckpoint")
    c = EpochFileCache.load(path)
    assert c.append(1, 0) and c.append(2, 500) and c.append(3, 500)
    assert not c.append(2, 600)
    assert EpochFileCache.load(path).entries == [EpochEntry(1, 0, 500),
                                                 EpochEntry(3, 500, OPEN_END)]


def test_damaged_file_falls_back_to_backup(tmp_path: Path) -> None:
    path = tmp_path / "epoch"
    c = EpochFileCache(str(path))
    c.append(1, 0)
    c.append(2, 100)
    path.write_bytes(path.read_bytes().replace(b"2 100", b"2 101"))
    again = EpochFileCache.load(str(path))
    assert [e.epoch for e in again.entries] == [1]


def test_find_epoch_by_offset() -> None:
    c = cache([(1, 0), (3, 500), (4, 900)], 1200)
    found = c.find_epoch_by_offset(499)
    assert found == EpochEntry(1, 0, 500)
    assert c.find_epoch_by_offset(500) == EpochEntry(3, 500, 900)
    assert c.find_epoch_by_offset(1199) == EpochEntry(4, 900, 1200)
    assert c.find_epoch_by_offset(1200) is None
    assert c.next_entry(1) == EpochEntry(3, 500, 900)


def test_truncation() -> None:
    c = cache([(1, 0), (2, 500), (3, 900)], 1200)
    c.truncate_suffix_by_offset(900)
    assert [e.epoch for e in c.entries] == [1, 2] and c.last_entry == EpochEntry(2, 500)
    c.truncate_suffix_by_epoch(2)
    assert [e.epoch for e in c.entries] == [1]
    d = cache([(1, 0), (2, 500), (3, 900)], 1200)
    d.truncate_prefix_by_offset(600)
    assert d.entries[0] == EpochEntry(2, 600, 900)


def test_consistent_point_rip44_cases() -> None:
    # A lost 900..1000 of epoch 0 (async flush); B became master at 900 in epoch 1.
    a = cache([(0, 0)], 1000)
    b = cache([(0, 0), (1, 900)], 1200)
    assert find_consistent_point(a, b) == 900
    # Same history: nothing to cut.
    assert find_consistent_point(cache([(0, 0), (1, 900)], 1200), b) == 1200
    # Diverged in epoch 1 versus 2: fall back to epoch 0's common part.
    c = cache([(0, 0), (1, 800)], 1000)
    d = cache([(0, 0), (2, 900)], 1300)
    assert find_consistent_point(c, d) == 800
    assert find_consistent_point(cache([(5, 0)], 10), d) == -1
