"""``put_batches``: the batches of several requests in one commitlog write and one wait,
each all or nothing, the same bytes as putting them one by one."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mqcluster.store import PutStatus
from mqcluster.store.batch import RawBatch

from .conftest import SEGMENT, StoreFactory, commitlog_bytes, count_writes, make_config

HOST = "10.0.0.2:10911"


def batch(n: int, first: int = 0, queue: int = 0, size: int = 100,
          topic: str = "T") -> RawBatch:
    return RawBatch(topic, queue, "10.0.0.1:5000", 1_000,
                    [bytes([(first + i) % 251]) * size for i in range(n)],
                    [b"UNIQ_KEY\x01id-%d\x02" % (first + i) for i in range(n)],
                    [0] * n, [first + i for i in range(n)])


async def test_batches_of_several_queues_go_in_one_write_with_the_same_bytes(
        store_factory: StoreFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one_by_one = store_factory(tmp_path / "one-by-one")
    together = store_factory(tmp_path / "together")
    for s in (one_by_one, together):
        await s.start()
    batches = [batch(2, first=2 * k, queue=k % 3) for k in range(5)]  # queue 0 and 1 twice
    singly = [one_by_one.append_raw_batch(b, 77, HOST) for b in batches]
    writes = count_writes(monkeypatch)
    grouped = together.append_raw_batches(batches, 77, HOST)
    assert writes == [20]  # one call: two buffers for each of the ten records
    assert [(r.status, r.queue_offset, r.commitlog_offsets) for r in grouped] == \
        [(r.status, r.queue_offset, r.commitlog_offsets) for r in singly]
    assert [r.queue_offset for r in grouped] == [0, 0, 0, 2, 2]
    assert commitlog_bytes(together) == commitlog_bytes(one_by_one)
    await together.wait_dispatched()
    assert [m.body[:1] for m in together.get_messages("T", 0, 0, 10).messages] == \
        [b"\x00", b"\x01", b"\x06", b"\x07"]


async def test_a_refused_batch_does_not_hold_up_the_others(store_factory: StoreFactory) -> None:
    store = store_factory()
    await store.start()
    too_big = batch(1, first=9, size=store.config.maxMessageSize + 1)
    results = await store.put_batches([batch(1), too_big, batch(1, first=1, topic="")])
    assert [r.status for r in results] == \
        [PutStatus.PUT_OK, PutStatus.MESSAGE_ILLEGAL, PutStatus.MESSAGE_ILLEGAL]
    assert "exceeds maxMessageSize" in results[1].remark
    await store.wait_dispatched()
    assert [m.body for m in store.get_messages("T", 0, 0, 10).messages] == [b"\x00" * 100]


async def test_batches_that_cross_a_segment_end_go_one_by_one(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    one_by_one = store_factory(tmp_path / "one-by-one")
    together = store_factory(tmp_path / "together")
    for s in (one_by_one, together):
        await s.start()
        s.append_raw_batch(batch(12, size=200), 77, HOST)  # most of the first segment
    batches = [batch(2, first=12 + 2 * k, size=200) for k in range(3)]
    singly = [one_by_one.append_raw_batch(b, 77, HOST) for b in batches]
    grouped = together.append_raw_batches(batches, 77, HOST)
    assert [r.commitlog_offsets for r in grouped] == [r.commitlog_offsets for r in singly]
    assert grouped[-1].commitlog_offsets[-1] > SEGMENT
    await together.wait_dispatched()
    assert [m.queue_offset for m in together.get_messages("T", 0, 0, 100).messages] == \
        list(range(18))


async def test_one_flush_serves_the_whole_group(store_factory: StoreFactory) -> None:
    store = store_factory()  # SYNC_FLUSH
    await store.start()
    rounds = store.flush_rounds
    results = await store.put_batches([batch(1, first=k, queue=k) for k in range(8)])
    assert all(r.status is PutStatus.PUT_OK for r in results)
    assert store.flush_rounds - rounds == 1
    assert store.flushed_offset >= store.commitlog_max_offset


async def test_a_store_that_is_not_running_refuses_every_batch(tmp_path: Path) -> None:
    from mqcluster.store import MessageStore

    store = MessageStore(make_config(tmp_path))
    results = await store.put_batches([batch(1), batch(1, first=1)])
    assert [r.status for r in results] == [PutStatus.SERVICE_NOT_AVAILABLE] * 2


async def test_a_burst_is_dispatched_as_one_run_per_queue_without_reading_it_back(
        store_factory: StoreFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    from mqcluster.store.dispatcher import Dispatcher

    store = store_factory()
    await store.start()
    await store.wait_dispatched()

    def no_scan(*args: object) -> None:
        raise AssertionError("the burst was read back from the commitlog")

    monkeypatch.setattr(Dispatcher, "_scan", no_scan)
    batches = [batch(1 + k % 2, first=10 * k, queue=k % 3) for k in range(7)]
    results = store.append_raw_batches(batches, 77, HOST)
    assert [r.queue_offset for r in results] == [0, 0, 0, 1, 2, 1, 3]
    (remembered,) = store._commitlog.recent
    assert [(run.queue_id, run.first, len(run.offsets)) for run in remembered.runs] == \
        [(0, 0, 4), (1, 0, 3), (2, 0, 3)]
    await store.wait_dispatched()
    for queue in range(3):
        got = store.get_messages("T", queue, 0, 10).messages
        expected = [(r.queue_offset + i, off) for b, r in zip(batches, results, strict=True)
                    if b.queue_id == queue for i, off in enumerate(r.commitlog_offsets)]
        assert [(m.queue_offset, m.commitlog_offset) for m in got] == expected


def test_with_properties_changes_only_the_properties() -> None:
    b = RawBatch("T", 2, "10.0.0.1:5000", 7, [b"a"], [b"p"], [5], [1], sys_flag=0,
                 reconsume_times=3)
    other = b.with_properties([b"q"])
    assert other == dataclasses.replace(b, properties=[b"q"])
    assert b.properties == [b"p"]
