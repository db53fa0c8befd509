"""What a DLedger entry's data holds: commitlog bytes and where they go; the layout of
older releases is still decoded for tools, never applied."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqcluster.broker.dledger import DLedgerStateMachine
from mqcluster.ha.dledger_entry import (
    EntryFormatError,
    decode_batch,
    decode_runs,
    encode_batch,
    encode_region,
    encode_runs,
    region_end,
    region_start,
    split_entry,
)
from mqcluster.raft.types import Entry, EntryType
from mqcluster.store import MessageStore
from mqcluster.store.built import BuiltBatch
from mqcluster.store.message import MessageRecord
from tests.store.conftest import make_config

runs = st.lists(st.builds(
    lambda topic, queue, first, start, ts, pairs: BuiltBatch(
        topic, queue, first, start, [p[0] for p in pairs], [p[1] for p in pairs], b"", ts),
    st.text(min_size=1, max_size=30), st.integers(0, 2**31 - 1), st.integers(0, 2**62),
    st.integers(0, 2**62), st.integers(0, 2**62),
    st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(-(2**63), 2**63 - 1)),
             min_size=1, max_size=5)), max_size=4)


@given(st.integers(0, 2**50), st.lists(st.binary(max_size=300), max_size=5), runs)
def test_an_entry_names_where_its_records_go_and_where_they_end(
        start: int, parts: list[bytes], batches: list[BuiltBatch]) -> None:
    data = encode_region(start, list(parts), encode_runs(batches))
    assert region_start(data) == start
    assert region_end(data) == start + sum(len(p) for p in parts)
    assert data.endswith(b"".join(parts))
    split = split_entry(data)
    assert split is not None and decode_runs(split[1]) == batches


def test_runs_past_the_entry_are_a_clear_error() -> None:
    data = encode_region(0, [b"x"], encode_runs([BuiltBatch("T", 0, 0, 0, [1], [0], b"", 1)]))
    with pytest.raises(EntryFormatError):
        decode_runs(split_entry(data)[1][:-3])  # type: ignore[index]
    with pytest.raises(EntryFormatError, match="past its end"):
        split_entry(data[:20])


@pytest.mark.parametrize("data", [
    encode_batch([MessageRecord("T", 1, b"body")], 7, "h:1"),  # version 1
    b"MQDL\x03\x00\x05host",  # version 3 (records built by the leader, in the entry)
    b"MQDL\x04\x00",  # cut short
    b"",
])
def test_an_entry_of_another_release_is_a_clear_error(data: bytes) -> None:
    assert region_start(data) is None
    with pytest.raises(EntryFormatError, match="another release"):
        region_end(data)


def test_the_one_by_one_layout_is_still_read() -> None:
    rec = MessageRecord("T", 1, b"body", tags="a", keys=["k"], properties={"x": "y"})
    assert decode_batch(encode_batch([rec], 7, "h:1")).records[0].body == b"body"


@pytest.mark.parametrize("cut", [6, 20, -1])
def test_a_truncated_entry_is_a_clear_error(cut: int) -> None:
    data = encode_batch([MessageRecord("T", 1, b"body")], 7, "h:1")
    with pytest.raises(EntryFormatError):
        decode_batch(data[:cut])


async def test_applying_an_entry_lets_the_consume_queues_reach_its_end(
        tmp_path: Path) -> None:
    store = MessageStore(make_config(tmp_path, storePathDLedgerCommitLog=str(
        tmp_path / "dledger")))
    await store.start()
    try:
        assert store.confirm_offset == 0
        sm = DLedgerStateMachine(store)
        data = encode_region(0, [b"x" * 50])
        sm.expect(data, [])
        assert sm.apply(Entry(index=3, term=1, type=EntryType.NORMAL, data=data)) == []
        assert store.confirm_offset == 50
        # applied again after a restart: the confirm offset never goes back
        sm.apply(Entry(index=2, term=1, type=EntryType.NORMAL, data=encode_region(0, [b"y"])))
        assert store.confirm_offset == 50
        with pytest.raises(EntryFormatError):
            sm.apply(Entry(index=4, term=1, type=EntryType.NORMAL, data=encode_batch(
                [MessageRecord("T", 1, b"body")], 7, "h:1")))
    finally:
        await store.shutdown()
