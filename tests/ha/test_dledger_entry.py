"""The two layouts of a DLedger entry's data."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqcluster.broker.dledger import PROPERTY_DLEDGER_INDEX, DLedgerStateMachine, last_applied
from mqcluster.ha.dledger_entry import (
    EntryFormatError,
    MessageBatch,
    RawEntry,
    decode_entry,
    encode_batch,
    encode_raw_batch,
)
from mqcluster.raft.types import Entry, EntryType
from mqcluster.store import MessageStore
from mqcluster.store.batch import RawBatch
from mqcluster.store.message import MessageRecord
from tests.store.conftest import make_config

messages = st.lists(st.tuples(st.binary(max_size=64), st.binary(max_size=32),
                              st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**31 - 1)),
                    min_size=1, max_size=8)


@given(messages, st.text(min_size=1, max_size=20), st.integers(0, 2**31 - 1))
def test_a_batch_comes_back_as_it_went(msgs: list[tuple[bytes, bytes, int, int]], topic: str,
                                       queue: int) -> None:
    batch = RawBatch(topic, queue, "10.0.0.1:5555", 1_700_000_000_123,
                     [m[0] for m in msgs], [m[1] for m in msgs], [m[2] for m in msgs],
                     [m[3] for m in msgs], sys_flag=0, reconsume_times=2)
    got = decode_entry(encode_raw_batch(batch, 42, "10.0.0.2:10911"))
    assert got == RawEntry(42, "10.0.0.2:10911", batch)


def test_the_one_by_one_layout_is_still_read() -> None:
    rec = MessageRecord("T", 1, b"body", tags="a", keys=["k"], properties={"x": "y"})
    got = decode_entry(encode_batch([rec], 7, "h:1"))
    assert isinstance(got, MessageBatch) and got.records[0].body == b"body"


@pytest.mark.parametrize("cut", [6, 20, -1])
def test_a_truncated_entry_is_a_clear_error(cut: int) -> None:
    batch = RawBatch("T", 0, "h:1", 1, [b"abc", b"def"], [b"", b"p"], [0, 0], [0, 0])
    data = encode_raw_batch(batch, 1, "h:2")
    with pytest.raises(EntryFormatError):
        decode_entry(data[:cut])


async def test_a_replica_resumes_a_batch_entry_after_its_last_stored_message(
        tmp_path: Path) -> None:
    store = MessageStore(make_config(tmp_path))
    await store.start()
    try:
        batch = RawBatch("T", 0, "h:1", 1, [b"a", b"b", b"c"], [b"", b"K\x01v", b""],
                         [0, 0, 0], [0, 0, 0])
        entry = Entry(index=9, term=1, type=EntryType.NORMAL,
                      data=encode_raw_batch(batch, 5, "h:2"))
        # A crash stored the first two messages of entry 9; only the third is missing.
        DLedgerStateMachine(store, None).apply(
            Entry(index=9, term=1, type=EntryType.NORMAL, data=encode_raw_batch(
                RawBatch("T", 0, "h:1", 1, [b"a", b"b"], [b"", b"K\x01v"], [0, 0], [0, 0]),
                5, "h:2")))
        resumed = last_applied(Path(store.config.commitlog_dir),
                               store.config.mappedFileSizeCommitLog)
        assert resumed == (9, 1)
        DLedgerStateMachine(store, resumed).apply(entry)
        await store.wait_dispatched()
        got = store.get_messages("T", 0, 0, 10).messages
        assert [m.body for m in got] == [b"a", b"b", b"c"]
        assert got[1].properties == {"K": "v", PROPERTY_DLEDGER_INDEX: "9.1"}
        assert got[2].properties == {PROPERTY_DLEDGER_INDEX: "9.2"}
    finally:
        await store.shutdown()
