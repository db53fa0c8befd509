"""Epoch entries (mqcluster.protocol.epochs): one type for the epoch file, the
GET_BROKER_EPOCH_CACHE answer and the sync point."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqcluster.protocol.controller import EpochEntryCache, ProtocolError
from mqcluster.protocol.epochs import OPEN_END, EpochEntry, EpochFileError, decode, encode

starts = st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**62)), max_size=20)


@settings(deadline=None, derandomize=True)
@given(starts)
def test_the_epoch_file_text_round_trips(pairs: list[tuple[int, int]]) -> None:
    assert decode(encode([EpochEntry(e, s) for e, s in pairs])) == pairs


@pytest.mark.parametrize("raw, problem", [
    (b"1\n0\n00000000\n", "bad epoch file header"),
    (encode([EpochEntry(1, 0)]).replace(b"1 0", b"1 9"), "checksum mismatch"),
    (b"0\n2\n" + encode([EpochEntry(1, 0)]).split(b"\n", 2)[2], "entry count mismatch"),
])
def test_a_damaged_epoch_file_is_named(raw: bytes, problem: str) -> None:
    with pytest.raises(EpochFileError, match=problem):
        decode(raw)


def test_an_open_entry_contains_everything_from_its_start() -> None:
    entry = EpochEntry(3, 500)
    assert entry.end_offset == OPEN_END
    assert entry.contains(500) and entry.contains(OPEN_END - 1) and not entry.contains(499)


def test_the_epoch_cache_answer_carries_the_same_entries() -> None:
    entries = [EpochEntry(1, 0, 100), EpochEntry(2, 100, 250)]
    cache = EpochEntryCache("DefaultCluster", "broker-a", 1, entries, 250)
    assert EpochEntryCache.decode(cache.encode()).epoch_list == entries
    assert entries[0].to_json() == {"epoch": 1, "startOffset": 0, "endOffset": 100}


def test_an_entry_without_an_end_is_not_known_and_a_bad_one_is_named() -> None:
    body = b'{"epochList": [{"epoch": 2, "startOffset": 100}]}'
    assert EpochEntryCache.decode(body).epoch_list == [EpochEntry(2, 100, -1)]
    with pytest.raises(ProtocolError, match="startOffset"):
        EpochEntryCache.decode(b'{"epochList": [{"epoch": 2, "startOffset": -5}]}')
