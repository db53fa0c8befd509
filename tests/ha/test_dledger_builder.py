"""Version 3 DLedger entries: records encoded once by the leader where every replica
stores them, and encoded again by any replica that is not there."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqcluster.broker.dledger import DLedgerStateMachine, last_applied
from mqcluster.broker.dledger_builder import EntryBuilder
from mqcluster.ha.dledger_entry import (
    BuiltEntry,
    BuiltGroup,
    EntryFormatError,
    decode_entry,
    encode_built,
    encode_raw_batch,
    mark_positions,
    unbuilt,
)
from mqcluster.raft.types import Entry, EntryType
from mqcluster.store import MessageStore
from mqcluster.store.batch import RawBatch, check_batch
from mqcluster.store.built import build
from mqcluster.store.message import PutStatus
from tests.store.conftest import make_config

HOST = "10.0.0.2:10911"
SEGMENT = 4096


def batch(n: int, first: int = 0, queue: int = 0, props: bytes = b"K\x01v\x02") -> RawBatch:
    return RawBatch("T", queue, "10.0.0.1:5000", 1_000,
                    [bytes([(first + i) % 251]) * 150 for i in range(n)],
                    [props + b"UNIQ_KEY\x01id-%d" % (first + i) for i in range(n)],
                    [first + i for i in range(n)], [i for i in range(n)])


def section(index: int, b: RawBatch, start: int = 0, first_queue_offset: int = 0,
            ts: int = 5, first_position: int = 0) -> BuiltEntry:
    marked = replace(b, properties=mark_positions(b.properties, index, first_position))
    enc, problem = check_batch(marked, HOST, 64 * 1024, 32 * 1024, SEGMENT)
    assert enc is not None, problem
    built = build(enc, start, first_queue_offset, ts)
    return BuiltEntry(index, HOST, b.born_host, b.born_timestamp, b.sys_flag,
                      b.reconsume_times, list(b.flags), built, first_position)


def built_entry(index: int, b: RawBatch, start: int = 0, first_queue_offset: int = 0,
                ts: int = 5) -> tuple[bytes, BuiltGroup]:
    group = BuiltGroup(index, HOST, [section(index, b, start, first_queue_offset, ts)])
    return encode_built(group), group


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[list[MessageStore]]:
    opened = [MessageStore(make_config(tmp_path / f"s{i}", mappedFileSizeCommitLog=SEGMENT))
              for i in range(2)]
    for s in opened:
        await s.start()
    yield opened
    for s in opened:
        await s.shutdown()


def commitlog(store: MessageStore) -> bytes:
    out = b""
    while len(out) < store.commitlog_max_offset:
        out += store.read_commitlog(len(out), store.commitlog_max_offset - len(out))
    return out


def normal(index: int, data: bytes) -> Entry:
    return Entry(index=index, term=1, type=EntryType.NORMAL, data=data)


@given(st.lists(st.binary(max_size=24), min_size=1, max_size=6), st.integers(1, 2**40))
def test_a_built_entry_comes_back_and_gives_back_the_producers_batch(
        props: list[bytes], index: int) -> None:
    b = batch(len(props))
    b = replace(b, properties=props)
    data, group = built_entry(index, b)
    decoded = decode_entry(data)
    assert isinstance(decoded, BuiltGroup) and decoded.index == index
    (got,), (entry,) = decoded.sections, group.sections
    assert (got.index, got.store_host, got.flags, got.built.sizes, got.built.tags_codes,
            bytes(got.built.records)) == (index, HOST, entry.flags, entry.built.sizes,
                                          entry.built.tags_codes, entry.built.records)
    back = unbuilt(got)
    assert back.bodies == b.bodies
    # marking again yields the very properties the leader stored (a producer's string
    # without its final separator comes back with it, which marks the same)
    assert mark_positions(back.properties, index, 0) == mark_positions(props, index, 0)


@pytest.mark.parametrize("cut", [6, 40, -1])
def test_a_truncated_built_entry_is_a_clear_error(cut: int) -> None:
    data, _ = built_entry(3, batch(2))
    with pytest.raises(EntryFormatError):
        decode_entry(data[:cut])


async def test_replicas_write_the_leaders_bytes_and_rebuild_the_same_bytes_elsewhere(
        stores: list[MessageStore]) -> None:
    fast, slow = stores
    data, _ = built_entry(4, batch(3))
    rebuilt: list[int] = []
    sm_fast = DLedgerStateMachine(fast, None, lambda: rebuilt.append(1))
    first = sm_fast.apply(normal(4, data))
    assert isinstance(first, list) and first[0].status is PutStatus.PUT_OK
    assert sm_fast.rebuilt == 0 and not rebuilt
    # The same batch, proposed as version 2, encodes to the same bytes on apply.
    DLedgerStateMachine(slow, None).apply(normal(4, encode_raw_batch(batch(3), 5, HOST)))
    assert commitlog(fast) == commitlog(slow)


async def test_an_entry_under_another_index_or_place_is_encoded_again(
        stores: list[MessageStore]) -> None:
    store, reference = stores
    rebuilt: list[int] = []
    sm = DLedgerStateMachine(store, None, lambda: rebuilt.append(1))
    ref = DLedgerStateMachine(reference, None)
    # the leader expected index 7 (an entry of the core's came first): marks say 7.x
    data, _ = built_entry(7, batch(2))
    sm.apply(normal(8, data))
    ref.apply(normal(8, encode_raw_batch(batch(2), 5, HOST)))
    # the leader expected an empty commitlog, this one is not
    data, _ = built_entry(9, batch(2, first=2), start=0, first_queue_offset=2)
    sm.apply(normal(9, data))
    ref.apply(normal(9, encode_raw_batch(batch(2, first=2), 5, HOST)))
    assert sm.rebuilt == 2 and len(rebuilt) == 2
    assert commitlog(store) == commitlog(reference)
    await store.wait_dispatched()
    got = store.get_messages("T", 0, 0, 10).messages
    assert [m.properties["DLEDGER_INDEX"] for m in got] == ["8.0", "8.1", "9.0", "9.1"]


async def test_a_leaders_projection_keeps_every_replica_on_the_fast_path(
        stores: list[MessageStore]) -> None:
    """Batches over two queues and several segment ends, placed one after another
    from an empty store, as a leader proposes them before any is applied."""
    leader_store, follower_store = stores
    builder = EntryBuilder()
    builder.start_from(leader_store.commitlog_max_offset)
    entries = []
    for k in range(12):
        index = 2 + k
        b = batch(4, first=4 * k, queue=k % 2)
        marked = replace(b, properties=mark_positions(b.properties, index, 0))
        enc, _ = check_batch(marked, HOST, 64 * 1024, 32 * 1024, SEGMENT)
        assert enc is not None
        placed = builder.place(enc, index, 5, HOST, leader_store.next_queue_offset, SEGMENT)
        assert placed is not None
        entries.append(normal(index, encode_built(BuiltGroup(index, HOST, [placed]))))
    machines = [DLedgerStateMachine(s, None) for s in stores]
    for e in entries:
        for sm in machines:
            result = sm.apply(e)
            assert isinstance(result, list) and result[0].status is PutStatus.PUT_OK
    assert [sm.rebuilt for sm in machines] == [0, 0]
    assert leader_store.commitlog_max_offset > 2 * SEGMENT
    assert commitlog(leader_store) == commitlog(follower_store)
    await follower_store.wait_dispatched()
    for queue in (0, 1):
        got = follower_store.get_messages("T", queue, 0, 100).messages
        assert [m.queue_offset for m in got] == list(range(24))


async def test_batches_gathered_in_one_entry_are_stored_as_if_sent_one_by_one(
        stores: list[MessageStore], tmp_path: Path) -> None:
    """Three sections of one entry, placed one after another: written as built; and
    under an index the leader did not expect, encoded again with their positions."""
    fast, slow = stores
    builder = EntryBuilder()
    builder.start_from(0)
    sections, position = [], 0
    for k, b in enumerate([batch(2), batch(3, first=2, queue=1), batch(1, first=5)]):
        marked = replace(b, properties=mark_positions(b.properties, 6, position))
        enc, _ = check_batch(marked, HOST, 64 * 1024, 32 * 1024, SEGMENT)
        assert enc is not None
        placed = builder.place(enc, 6, 5 + k, HOST, fast.next_queue_offset, SEGMENT, position)
        assert placed is not None
        sections.append(placed)
        position += len(b.bodies)
    data = encode_built(BuiltGroup(6, HOST, sections))
    results = DLedgerStateMachine(fast, None).apply(normal(6, data))
    assert isinstance(results, list)
    assert [(r.status, r.queue_offset) for r in results] == [(PutStatus.PUT_OK, 0),
                                                             (PutStatus.PUT_OK, 0),
                                                             (PutStatus.PUT_OK, 2)]
    moved = DLedgerStateMachine(slow, None)
    moved.apply(normal(7, data))  # another index: every section encoded again
    assert moved.rebuilt == 3
    for store, index in ((fast, 6), (slow, 7)):
        await store.wait_dispatched()
        marks = [m.properties["DLEDGER_INDEX"]
                 for q in (0, 1) for m in store.get_messages("T", q, 0, 10).messages]
        assert marks == [f"{index}.{p}" for p in (0, 1, 5, 2, 3, 4)]
    # a crash after the second section: on restart, the third only is stored
    crashed = MessageStore(make_config(tmp_path / "crashed", mappedFileSizeCommitLog=SEGMENT))
    await crashed.start()
    try:
        DLedgerStateMachine(crashed, None).apply(
            normal(6, encode_built(BuiltGroup(6, HOST, sections[:2]))))
        resume = last_applied(Path(crashed.config.commitlog_dir), SEGMENT)
        assert resume == (6, 4)
        resumed = DLedgerStateMachine(crashed, resume)
        again = resumed.apply(normal(6, data))
        assert isinstance(again, list) and [r.status for r in again] == [PutStatus.PUT_OK] * 3
        assert resumed.rebuilt == 0
        assert commitlog(crashed) == commitlog(fast)
    finally:
        await crashed.shutdown()
