"""Batches encoded ahead (``store.built``): placed where an append would put them, and
written only where they were placed."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqcluster.store import MessageStore, PutStatus
from mqcluster.store.batch import RawBatch, check_batch
from mqcluster.store.built import BuiltBatch, build, placement
from mqcluster.store.codec import END_FILE_MIN_BLANK_LENGTH

from .conftest import SEGMENT, StoreFactory, commitlog_bytes, count_writes

HOST = "10.0.0.2:10911"


def batch(n: int, first: int = 0, queue: int = 0, size: int = 200) -> RawBatch:
    return RawBatch("T", queue, "10.0.0.1:5000", 1_000,
                    [bytes([(first + i) % 251]) * size for i in range(n)],
                    [b"UNIQ_KEY\x01id-%d\x02" % (first + i) for i in range(n)],
                    [first + i for i in range(n)], [i for i in range(n)])


def built_for(store: MessageStore, b: RawBatch, start: int | None = None,
              first_queue_offset: int | None = None) -> BuiltBatch:
    cfg = store.config
    enc, problem = check_batch(b, HOST, cfg.maxMessageSize, cfg.maxPropertiesSize, SEGMENT)
    assert enc is not None, problem
    if start is None:
        start = placement(store.commitlog_max_offset, sum(enc.sizes), SEGMENT)
        assert start is not None
    if first_queue_offset is None:
        first_queue_offset = store.next_queue_offset(b.topic, b.queue_id)
    return build(enc, start, first_queue_offset, 77)


@pytest.mark.parametrize(("end", "total", "expected"), [
    (0, 100, 0),
    (1000, 100, 1000),
    (SEGMENT - 108, 100, SEGMENT - 108),  # exactly leaves the blank's minimum
    (SEGMENT - 107, 100, SEGMENT),  # one byte short: the next segment
    (3 * SEGMENT + 5, SEGMENT - END_FILE_MIN_BLANK_LENGTH, 4 * SEGMENT),
    (0, SEGMENT - END_FILE_MIN_BLANK_LENGTH + 1, None),  # no segment holds it
])
def test_placement(end: int, total: int, expected: int | None) -> None:
    assert placement(end, total, SEGMENT) == expected


async def test_built_records_are_the_bytes_an_append_writes(store_factory: StoreFactory,
                                                             tmp_path: Path) -> None:
    appended = store_factory(tmp_path / "appended")
    built = store_factory(tmp_path / "built")
    for s in (appended, built):
        await s.start()
    for k in range(6):  # 200-byte bodies, 4 KiB segments: several segment ends
        b = batch(5, first=5 * k, queue=k % 2)
        want = appended.append_raw_batch(b, 77, HOST)
        got = built.append_built_batch(built_for(built, b))
        assert got is not None and got.status is PutStatus.PUT_OK
        assert (got.queue_offset, got.sizes) == (want.queue_offset, want.sizes)
        # where an append split the batch over two segments, the built one moved whole
        assert got.commitlog_offsets[0] >= want.commitlog_offsets[0]
    for s in (appended, built):
        await s.wait_dispatched()
    for queue in (0, 1):
        a = appended.get_messages("T", queue, 0, 100).messages
        b2 = built.get_messages("T", queue, 0, 100).messages
        assert [(m.body, m.properties, m.queue_offset, m.store_timestamp) for m in a] == \
            [(m.body, m.properties, m.queue_offset, m.store_timestamp) for m in b2]
        assert len(a) == 15


async def test_without_a_segment_end_the_bytes_are_identical(store_factory: StoreFactory,
                                                               tmp_path: Path) -> None:
    appended = store_factory(tmp_path / "appended")
    built = store_factory(tmp_path / "built")
    for s in (appended, built):
        await s.start()
    b = batch(3, size=100)
    appended.append_raw_batch(b, 77, HOST)
    assert built.append_built_batch(built_for(built, b)) is not None
    assert commitlog_bytes(built) == commitlog_bytes(appended)


async def test_a_built_batch_elsewhere_writes_nothing(store_factory: StoreFactory) -> None:
    store = store_factory()
    await store.start()
    store.append_raw_batch(batch(2), 77, HOST)
    end = store.commitlog_max_offset
    wrong_place = built_for(store, batch(2, first=2), start=end + 8)
    wrong_queue_offset = built_for(store, batch(2, first=2), first_queue_offset=5)
    for b in (wrong_place, wrong_queue_offset):
        assert store.append_built_batch(b) is None
    assert store.commitlog_max_offset == end
    right = store.append_built_batch(built_for(store, batch(2, first=2)))
    assert right is not None and right.queue_offset == 2


async def test_a_built_batch_past_a_segment_end_pads_it_and_reads_back(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    store = store_factory()
    await store.start()
    store.append_raw_batch(batch(12, size=200), 77, HOST)  # most of the first segment
    assert store.commitlog_max_offset < SEGMENT
    b = built_for(store, batch(5, first=12, size=200))
    assert b.start == SEGMENT
    got = store.append_built_batch(b)
    assert got is not None and got.commitlog_offsets[0] == SEGMENT
    await store.wait_dispatched()
    msgs = store.get_messages("T", 0, 0, 100).messages
    assert [m.queue_offset for m in msgs] == list(range(17))
    assert msgs[12].commitlog_offset == SEGMENT and msgs[12].body == bytes([12]) * 200


async def test_a_replica_leaves_dispatch_to_the_dispatcher(store_factory: StoreFactory) -> None:
    store = store_factory(flushDiskType="ASYNC_FLUSH")
    await store.start()
    for k in range(3):
        assert store.append_built_batch(built_for(store, batch(2, first=2 * k)),
                                        dispatch_now=False) is not None
    assert store.dispatched_offset == 0  # nothing dispatched in the appends' own turns
    await store.wait_dispatched()
    assert [m.queue_offset for m in store.get_messages("T", 0, 0, 10).messages] == \
        list(range(6))
    leader_style = store.append_built_batch(built_for(store, batch(1, first=6)))
    assert leader_style is not None
    assert store.dispatched_offset == store.commitlog_max_offset  # at once


def group_for(store: MessageStore, batches: list[RawBatch]) -> list[BuiltBatch]:
    """Batches placed one after another from the commitlog's end, as a DLedger leader
    places the sections of one entry."""
    cfg = store.config
    end = store.commitlog_max_offset
    next_offsets: dict[tuple[str, int], int] = {}
    out = []
    for b in batches:
        enc, problem = check_batch(b, HOST, cfg.maxMessageSize, cfg.maxPropertiesSize,
                                   SEGMENT)
        assert enc is not None, problem
        start = placement(end, sum(enc.sizes), SEGMENT)
        assert start is not None
        key = (b.topic, b.queue_id)
        first = next_offsets.get(key, store.next_queue_offset(*key))
        out.append(build(enc, start, first, 77))
        next_offsets[key] = first + len(enc.sizes)
        end = start + sum(enc.sizes)
    return out


async def test_a_group_of_built_batches_is_written_at_once(
        store_factory: StoreFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one_by_one = store_factory(tmp_path / "one-by-one")
    grouped = store_factory(tmp_path / "grouped")
    for s in (one_by_one, grouped):
        await s.start()
        s.append_raw_batch(batch(2, size=100), 77, HOST)
    batches = [batch(1, first=2 + k, queue=k % 2, size=100) for k in range(6)]
    singly = [one_by_one.append_built_batch(b) for b in group_for(one_by_one, batches)]
    writes = count_writes(monkeypatch)
    together = grouped.append_built_group(group_for(grouped, batches))
    assert together is not None and writes == [6]  # one call, the six batches' records
    assert [(r.status, r.queue_offset, r.commitlog_offsets) for r in together] == \
        [(r.status, r.queue_offset, r.commitlog_offsets) for r in singly if r is not None]
    assert commitlog_bytes(grouped) == commitlog_bytes(one_by_one)
    await grouped.wait_dispatched()
    assert [m.queue_offset for m in grouped.get_messages("T", 0, 0, 10).messages] == \
        [0, 1, 2, 3, 4]
    assert [m.body[:1] for m in grouped.get_messages("T", 1, 0, 10).messages] == \
        [bytes([3]), bytes([5]), bytes([7])]


async def test_a_group_past_a_segment_end_pads_it_first(store_factory: StoreFactory) -> None:
    store = store_factory()
    await store.start()
    store.append_raw_batch(batch(12, size=200), 77, HOST)
    group = group_for(store, [batch(2, first=12 + 2 * k, size=200) for k in range(3)])
    assert group[0].start == SEGMENT and group[1].start == group[0].end
    assert store.append_built_group(group) is not None
    await store.wait_dispatched()
    msgs = store.get_messages("T", 0, 0, 100).messages
    assert [m.queue_offset for m in msgs] == list(range(18))
    assert msgs[12].commitlog_offset == SEGMENT


async def test_a_group_not_in_one_piece_writes_nothing(store_factory: StoreFactory) -> None:
    store = store_factory()
    await store.start()
    store.append_raw_batch(batch(2), 77, HOST)
    end = store.commitlog_max_offset
    # the second batch does not fit after the first: the leader placed it in the next
    # segment, so the sections are written one by one instead
    crossing = group_for(store, [batch(6, first=2 + 6 * k, size=200) for k in range(3)])
    assert crossing[0].start == end and crossing[1].start == SEGMENT
    skipped_offset = group_for(store, [batch(1, first=2), batch(1, first=3)])
    skipped_offset[1].first_queue_offset += 1
    elsewhere = group_for(store, [batch(1, first=2)])
    elsewhere[0].start += 8
    for group in (crossing, skipped_offset, elsewhere):
        assert store.append_built_group(group) is None
    assert store.commitlog_max_offset == end
    for b in crossing:
        assert store.append_built_batch(b) is not None
    await store.wait_dispatched()
    assert [m.queue_offset for m in store.get_messages("T", 0, 0, 100).messages] == \
        list(range(20))
