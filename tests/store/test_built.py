"""Batches encoded ahead (``store.built``): placed where an append would put them, and
written there as they are, they hold what the append stores."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqcluster.store import MessageStore, codec
from mqcluster.store.batch import RawBatch, check_batch
from mqcluster.store.built import BuiltBatch, build, placement
from mqcluster.store.codec import END_FILE_MIN_BLANK_LENGTH

from .conftest import SEGMENT, StoreFactory, commitlog_bytes

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


def write(store: MessageStore, built: BuiltBatch) -> None:
    """As a DLedger replica writes a leader's records: the bytes where they were placed
    (a blank record and zeros before them when they start the next segment)."""
    end = store.commitlog_max_offset
    gap = built.start - end
    pad = codec.encode_blank(gap) + bytes(gap - END_FILE_MIN_BLANK_LENGTH) if gap else b""
    assert store.append_replicated(end, pad + bytes(built.records), [built])


async def test_built_records_hold_the_messages_an_append_stores(store_factory: StoreFactory,
                                                                 tmp_path: Path) -> None:
    appended = store_factory(tmp_path / "appended")
    built = store_factory(tmp_path / "built")
    for s in (appended, built):
        await s.start()
    for k in range(6):  # 200-byte bodies, 4 KiB segments: several segment ends
        b = batch(5, first=5 * k, queue=k % 2)
        want = appended.append_raw_batch(b, 77, HOST)
        placed = built_for(built, b)
        assert placed.first_queue_offset == want.queue_offset and placed.sizes == want.sizes
        # where an append split the batch over two segments, the built one moved whole
        assert placed.start >= want.commitlog_offsets[0]
        write(built, placed)
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
    write(built, built_for(built, b))
    assert commitlog_bytes(built) == commitlog_bytes(appended)


async def test_a_built_batch_past_a_segment_end_reads_back(
        store_factory: StoreFactory) -> None:
    store = store_factory()
    await store.start()
    store.append_raw_batch(batch(12, size=200), 77, HOST)  # most of the first segment
    assert store.commitlog_max_offset < SEGMENT
    b = built_for(store, batch(5, first=12, size=200))
    assert b.start == SEGMENT
    write(store, b)
    await store.wait_dispatched()
    msgs = store.get_messages("T", 0, 0, 100).messages
    assert [m.queue_offset for m in msgs] == list(range(17))
    assert msgs[12].commitlog_offset == SEGMENT and msgs[12].body == bytes([12]) * 200
