"""A DLedger leader's records, placed ahead of any append: the bytes every replica writes
as they are must be the very bytes a store appending the same messages itself writes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqcluster.broker.dledger_builder import EntryBuilder
from mqcluster.ha.dledger_entry import mark_positions
from mqcluster.store import MessageStore
from mqcluster.store.batch import RawBatch, check_batch
from mqcluster.store.codec import TRANSACTION_PREPARED_TYPE, prepare_all
from mqcluster.store.message import MessageRecord
from tests.store.conftest import make_config

HOST = "10.0.0.2:10911"
SEGMENT = 4096


def batch(n: int, first: int = 0, queue: int = 0, size: int = 150) -> RawBatch:
    return RawBatch("T", queue, "10.0.0.1:5000", 1_000,
                    [bytes([(first + i) % 251]) * size for i in range(n)],
                    [b"K\x01v\x02UNIQ_KEY\x01id-%d" % (first + i) for i in range(n)],
                    [first + i for i in range(n)], [i for i in range(n)])


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


async def test_placed_batches_are_the_bytes_a_store_appends_itself(
        stores: list[MessageStore]) -> None:
    """Batches over two queues and several segment ends, placed one after another from
    an empty store as a leader places them before any is written: written as they are,
    they give the commitlog, queue offsets and consume queues of plain appends."""
    written, appended = stores
    builder = EntryBuilder()
    builder.start_from(written.commitlog_max_offset)
    for k in range(12):
        b = batch(4, first=4 * k, queue=k % 2)
        marked = replace(b, properties=mark_positions(b.properties, 2 + k, 0))
        enc, _ = check_batch(marked, HOST, 64 * 1024, 32 * 1024, SEGMENT)
        assert enc is not None
        built = builder.place(enc, 5, written.next_queue_offset, SEGMENT)
        assert built is not None and built.first_queue_offset == 4 * (k // 2)
        start, parts, runs = builder.take()
        assert [(r.first_queue_offset, r.sizes) for r in runs] == [
            (built.first_queue_offset, built.sizes)]
        # (the consume-queue entries given: the dispatcher reads no record back)
        assert written.append_replicated(start, b"".join(parts), runs)
        appended.append_raw_batch(marked, 5, HOST)
    assert written.commitlog_max_offset > 2 * SEGMENT
    for store in stores:
        await store.wait_dispatched()
    for queue in (0, 1):
        got, want = (s.get_messages("T", queue, 0, 100).messages for s in stores)
        assert [m.queue_offset for m in got] == list(range(24))
        # (the store splits a batch at a segment's end, a leader moves it whole to the
        # next segment: the same messages, at other offsets)
        assert [(m.body, m.properties, m.store_timestamp) for m in got] == \
            [(m.body, m.properties, m.store_timestamp) for m in want]


async def test_batches_gathered_for_one_entry_follow_each_other(
        stores: list[MessageStore]) -> None:
    """Several batches placed before one ``take``: one region, blank records padding
    the segment ends it crosses, the same bytes as placed one entry at a time."""
    together, apart = stores
    builders = [EntryBuilder(), EntryBuilder()]
    for b in builders:
        b.start_from(0)
    for k in range(9):
        b = batch(3, first=3 * k, queue=k % 3, size=400)
        enc, _ = check_batch(b, HOST, 64 * 1024, 32 * 1024, SEGMENT)
        assert enc is not None
        for builder, store in zip(builders, stores, strict=True):
            assert builder.place(enc, 5, store.next_queue_offset, SEGMENT) is not None
        start, parts, _ = builders[1].take()
        assert apart.append_replicated(start, b"".join(parts))
    start, parts, runs = builders[0].take()
    assert start == 0 and builders[0].gathered == 0 and len(runs) == 9
    assert together.append_replicated(0, b"".join(parts))
    assert together.commitlog_max_offset > 2 * SEGMENT
    assert commitlog(together) == commitlog(apart)
    await together.wait_dispatched()
    assert [m.queue_offset for m in together.get_messages("T", 2, 0, 100).messages] == \
        list(range(9))


async def test_placed_messages_of_any_kind_are_the_bytes_a_store_appends_itself(
        stores: list[MessageStore]) -> None:
    """Single sends: queue offsets per queue; a prepared transaction takes none."""
    written, appended = stores
    builder = EntryBuilder()
    builder.start_from(0)
    recs = [MessageRecord("T", i % 2, bytes([i]) * 700, properties={"UNIQ_KEY": f"u{i}"},
                          born_timestamp=1_000, born_host="10.0.0.1:5000",
                          sys_flag=TRANSACTION_PREPARED_TYPE if i == 3 else 0)
            for i in range(14)]
    placed = [builder.place_record(parts, 9, written.next_queue_offset, SEGMENT)
              for parts in prepare_all(recs, HOST)]
    assert [p[1] for p in placed if p is not None] == [0, 0, 1, 0, 2, 1, 3, 2, 4, 3, 5, 4, 6, 5]
    start, parts, _ = builder.take()
    assert written.append_replicated(start, b"".join(parts))
    results, _ = appended.append_records(recs, 9, HOST)
    assert commitlog(written) == commitlog(appended)
    assert placed == [(r.commitlog_offset, max(r.queue_offset, 0)) for r in results]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 3000), min_size=1, max_size=20))
def test_records_never_straddle_a_segment_end(sizes: list[int]) -> None:
    builder = EntryBuilder()
    builder.start_from(100)
    for n, size in enumerate(sizes):
        enc, _ = check_batch(batch(1, first=n, size=size), HOST, 64 * 1024, 32 * 1024, SEGMENT)
        assert enc is not None
        built = builder.place(enc, 5, lambda _t, _q: 0, SEGMENT)
        assert built is not None
        assert built.start // SEGMENT == (built.end - 1) // SEGMENT
        assert built.end % SEGMENT == 0 or SEGMENT - built.end % SEGMENT >= 8
    start, parts, _ = builder.take()
    assert start == 100 and start + sum(len(p) for p in parts) == builder.end


def test_a_batch_no_segment_holds_is_not_placed() -> None:
    builder = EntryBuilder()
    builder.start_from(0)
    enc, _ = check_batch(batch(1, size=SEGMENT), HOST, 64 * 1024, 32 * 1024, SEGMENT * 2)
    assert enc is not None
    assert builder.place(enc, 5, lambda _t, _q: 0, SEGMENT) is None
    assert builder.gathered == 0
