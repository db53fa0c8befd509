from __future__ import annotations

import asyncio
import errno
import os
import shutil

import pytest

from mqcluster.store import GetStatus, MessageRecord, PutStatus, TagFilter, tags_code
from mqcluster.store.codec import BLANK_MAGIC, PREFIX
from mqcluster.store.segment import Segment

from .conftest import SEGMENT, FakeClock, StoreFactory, rec


async def test_put_and_read_round_trip(store_factory: StoreFactory) -> None:
    store = store_factory()
    await store.start()
    results = [await store.put_message(rec(i)) for i in range(5)]
    assert [r.status for r in results] == [PutStatus.PUT_OK] * 5
    assert [r.queue_offset for r in results] == [0, 1, 2, 3, 4]
    assert [r.msg_id for r in results] == [f"id-{i}" for i in range(5)]
    assert results[1].commitlog_offset == results[0].next_commitlog_offset
    await store.wait_dispatched()
    got = store.get_messages("T", 0, 0, 10)
    assert got.status is GetStatus.FOUND
    assert (got.next_offset, got.min_offset, got.max_offset) == (5, 0, 5)
    for i, msg in enumerate(got.messages):
        assert msg.body == bytes([i]) * 100 and msg.keys == [f"k{i}"]
        assert msg.queue_offset == i and msg.commitlog_offset == results[i].commitlog_offset
        assert msg.born_timestamp == 1000 + i and msg.born_host == "10.0.0.1:5000"
    by_offset = store.get_message_by_offset(results[3].commitlog_offset)
    assert by_offset is not None and by_offset.msg_id == "id-3"
    assert store.get_message_by_offset(results[3].commitlog_offset + 1) is None


async def test_segment_roll_never_splits_a_message(store_factory: StoreFactory) -> None:
    store = store_factory()
    await store.start()
    results = await store.put_messages([rec(i, size=900) for i in range(20)])
    for r in results:
        start_seg = r.commitlog_offset // SEGMENT
        assert (r.next_commitlog_offset - 1) // SEGMENT == start_seg
    names = sorted(os.listdir(store.config.commitlog_dir))
    assert names[:3] == ["00000000000000000000", "00000000000000004096", "00000000000000008192"]
    assert all(os.path.getsize(os.path.join(store.config.commitlog_dir, n)) == SEGMENT
               for n in names)
    last_in_first = [r for r in results if r.commitlog_offset < SEGMENT][-1]
    with open(os.path.join(store.config.commitlog_dir, names[0]), "rb") as f:
        f.seek(last_in_first.next_commitlog_offset)
        size, magic = PREFIX.unpack(f.read(PREFIX.size))
    assert magic == BLANK_MAGIC and last_in_first.next_commitlog_offset + size == SEGMENT
    await store.wait_dispatched()
    got = store.get_messages("T", 0, 0, 100)
    assert [m.queue_offset for m in got.messages] == list(range(20))


async def test_batch_gets_consecutive_offsets_and_one_flush(store_factory: StoreFactory) -> None:
    store = store_factory()
    await store.start()
    assert store._flusher is not None
    before = store._flusher.rounds
    results = await store.put_messages([rec(i) for i in range(10)])
    assert [r.queue_offset for r in results] == list(range(10))
    assert store._flusher.rounds - before == 1


async def test_queues_are_independent(store_factory: StoreFactory) -> None:
    store = store_factory()
    await store.start()
    for i in range(9):
        await store.put_message(rec(i, queue_id=i % 3, topic="A" if i < 6 else "B"))
    await store.wait_dispatched()
    assert store.queues() == [("A", 0), ("A", 1), ("A", 2), ("B", 0), ("B", 1), ("B", 2)]
    assert store.max_offset("A", 0) == 2 and store.max_offset("B", 2) == 1
    assert store.max_offset("C", 0) == 0


async def test_get_statuses(store_factory: StoreFactory) -> None:
    store = store_factory()
    await store.start()
    assert store.get_messages("T", 0, 0).status is GetStatus.NO_MESSAGE_IN_QUEUE
    await store.put_messages([rec(i) for i in range(3)])
    await store.wait_dispatched()
    one = store.get_messages("T", 0, 3)
    assert (one.status, one.next_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 3)
    badly = store.get_messages("T", 0, 9)
    assert (badly.status, badly.next_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 3)
    two = store.get_messages("T", 0, 1, max_count=1)
    assert [m.queue_offset for m in two.messages] == [1] and two.next_offset == 2


async def test_tag_filtering(store_factory: StoreFactory) -> None:
    store = store_factory()
    await store.start()
    await store.put_messages([rec(i, tags="A" if i % 3 == 0 else "B") for i in range(12)])
    await store.wait_dispatched()
    got = store.get_messages("T", 0, 0, 100, TagFilter.of("A"))
    assert [m.queue_offset for m in got.messages] == [0, 3, 6, 9]
    assert got.next_offset == 12
    by_code = store.get_messages("T", 0, 0, 100, {tags_code("B")})
    assert len(by_code.messages) == 8
    none = store.get_messages("T", 0, 0, 100, TagFilter.of("C"))
    assert (none.status, none.next_offset) == (GetStatus.NO_MATCHED_MESSAGE, 12)
    pred = store.get_messages("T", 0, 0, 100, lambda m: m.keys == ["k4"])
    assert [m.queue_offset for m in pred.messages] == [4]


async def test_consume_queue_files_and_entries(store_factory: StoreFactory) -> None:
    store = store_factory()
    await store.start()
    results = await store.put_messages([rec(i) for i in range(25)])
    await store.wait_dispatched()
    cq_dir = os.path.join(store.config.consumequeue_dir, "T", "0")
    assert sorted(os.listdir(cq_dir)) == [
        "00000000000000000000", "00000000000000000200", "00000000000000000400"]
    cq = store._queues.get("T", 0)
    assert cq is not None
    entries = cq.entries(9, 5)
    assert [e.queue_offset for e in entries] == [9]  # stops at the file end
    assert entries[0].commitlog_offset == results[9].commitlog_offset
    assert entries[0].size == results[9].store_size


async def test_rebuild_of_a_deleted_consume_queue(store_factory: StoreFactory) -> None:
    store = store_factory()
    await store.start()
    await store.put_messages([rec(i, queue_id=i % 2) for i in range(30)])
    await store.shutdown()
    shutil.rmtree(os.path.join(store.config.consumequeue_dir, "T", "1"))
    again = store_factory()
    await again.start()
    assert again.max_offset("T", 1) == 15 and again.max_offset("T", 0) == 15
    got = again.get_messages("T", 1, 0, 100)
    assert [int(m.msg_id.split("-")[1]) for m in got.messages] == list(range(1, 30, 2))
    result = await again.put_message(rec(99, queue_id=1))
    assert result.queue_offset == 15


async def test_rebuild_when_the_whole_consumequeue_dir_is_gone(
        store_factory: StoreFactory) -> None:
    store = store_factory()
    await store.start()
    await store.put_messages([rec(i) for i in range(30)])
    await store.shutdown()
    shutil.rmtree(store.config.consumequeue_dir)
    again = store_factory()
    await again.start()
    assert again.max_offset("T", 0) == 30
    assert len(again.get_messages("T", 0, 0, 100).messages) == 30


async def test_illegal_messages_are_refused(store_factory: StoreFactory) -> None:
    store = store_factory(maxMessageSize=1000)
    await store.start()
    big = await store.put_message(rec(1, size=1001))
    assert big.status is PutStatus.MESSAGE_ILLEGAL
    no_topic = await store.put_message(MessageRecord("", 0, b"x"))
    assert no_topic.status is PutStatus.MESSAGE_ILLEGAL
    props = await store.put_message(MessageRecord("T", 0, b"x", properties={"p": "v" * 40000}))
    assert props.status is PutStatus.PROPERTIES_SIZE_EXCEEDED
    assert store.commitlog_max_offset == 0


async def test_put_before_start_is_refused(store_factory: StoreFactory) -> None:
    store = store_factory()
    assert (await store.put_message(rec(0))).status is PutStatus.SERVICE_NOT_AVAILABLE


async def test_arrival_listener_and_offset_by_time(store_factory: StoreFactory,
                                                   clock: FakeClock) -> None:
    store = store_factory()
    seen: list[tuple[str, int, int]] = []
    store.add_arrival_listener(lambda t, q, m: seen.append((t, q, m)))
    await store.start()
    for i in range(4):
        await store.put_message(rec(i))
        clock.advance(10)
    await store.wait_dispatched()
    assert seen and seen[-1] == ("T", 0, 4)
    first = store.get_messages("T", 0, 0, 10).messages
    assert store.offset_by_time("T", 0, first[2].store_timestamp) == 2
    assert store.offset_by_time("T", 0, first[3].store_timestamp + 1) == 4


async def test_concurrent_puts_keep_offsets_unique(store_factory: StoreFactory) -> None:
    store = store_factory(flushDiskType="ASYNC_FLUSH")
    await store.start()
    results = await asyncio.gather(*(store.put_message(rec(i)) for i in range(50)))
    assert sorted(r.queue_offset for r in results) == list(range(50))


async def test_topic_names_that_cannot_be_directories_are_refused(
        store_factory: StoreFactory) -> None:
    store = store_factory()
    await store.start()
    for topic in ("a/b", "..", "x y"):
        assert (await store.put_message(MessageRecord(topic, 0, b"x"))).status is (
            PutStatus.MESSAGE_ILLEGAL)
    ok = await store.put_message(MessageRecord("%RETRY%group-1", 0, b"x"))
    assert ok.status is PutStatus.PUT_OK


async def test_offline_readers_see_what_the_store_wrote(store_factory: StoreFactory) -> None:
    from mqcluster.store.offline import iter_consume_queue, iter_messages

    store = store_factory()
    await store.start()
    results = await store.put_messages([rec(i, size=700) for i in range(15)])
    await store.wait_dispatched()
    msgs = list(iter_messages(store.config.commitlog_dir))
    assert [m.commitlog_offset for m in msgs] == [r.commitlog_offset for r in results]
    entries = list(iter_consume_queue(os.path.join(store.config.consumequeue_dir, "T", "0")))
    assert [(e.queue_offset, e.commitlog_offset) for e in entries] == [
        (r.queue_offset, r.commitlog_offset) for r in results]


async def test_failed_write_rolls_back(store_factory: StoreFactory,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    store = store_factory()
    await store.start()
    first = await store.put_messages([rec(i, size=900) for i in range(3)])
    end = first[-1].next_commitlog_offset

    def no_space(self: Segment, pos: int, data: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(Segment, "write", no_space)
        failed = await store.put_messages([rec(i, size=900) for i in range(3, 9)])
    assert {r.status for r in failed} == {PutStatus.UNKNOWN_ERROR}
    assert store.commitlog_max_offset == end
    again = await store.put_message(rec(9))
    assert (again.queue_offset, again.commitlog_offset) == (3, end)
