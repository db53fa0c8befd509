from __future__ import annotations

import random
from pathlib import Path

from mqcluster.store import PutStatus

from .conftest import SEGMENT, StoreFactory, rec


async def test_raw_copy_makes_an_identical_replica(store_factory: StoreFactory,
                                                   tmp_path: Path) -> None:
    master = store_factory(root=tmp_path / "master")
    slave = store_factory(root=tmp_path / "slave")
    await master.start()
    await slave.start()
    await master.put_messages([rec(i, queue_id=i % 2, size=300) for i in range(40)])
    rng = random.Random(7)
    while slave.commitlog_max_offset < master.commitlog_max_offset:
        offset = slave.commitlog_max_offset
        chunk = master.read_commitlog(offset, rng.randint(1, 700))
        assert chunk
        assert await slave.append_commitlog(offset, chunk)
    assert not await slave.append_commitlog(0, b"x")
    await slave.wait_dispatched()
    for qid in (0, 1):
        assert slave.max_offset("T", qid) == master.max_offset("T", qid) == 20
        assert ([m.msg_id for m in slave.get_messages("T", qid, 0, 100).messages]
                == [m.msg_id for m in master.get_messages("T", qid, 0, 100).messages])
    promoted = await slave.put_message(rec(99, queue_id=1))
    assert promoted.status is PutStatus.PUT_OK and promoted.queue_offset == 20


async def test_dispatch_stops_at_the_confirm_offset(store_factory: StoreFactory) -> None:
    store = store_factory()
    await store.start()
    store.set_confirm_offset(0)
    results = await store.put_messages([rec(i) for i in range(5)])
    assert store.max_offset("T", 0) == 0
    assert store.dispatch_behind_bytes == 0
    store.set_confirm_offset(results[2].next_commitlog_offset)
    await store.wait_dispatched(results[2].next_commitlog_offset)
    assert store.max_offset("T", 0) == 3
    store.set_confirm_offset(None)
    await store.wait_dispatched()
    assert store.max_offset("T", 0) == 5


async def test_empty_replica_can_start_from_the_masters_last_segment(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    master = store_factory(root=tmp_path / "master")
    slave = store_factory(root=tmp_path / "slave")
    await master.start()
    await slave.start()
    results = await master.put_messages([rec(i, size=900) for i in range(12)])
    start = master.commitlog_max_offset // SEGMENT * SEGMENT
    assert start > 0
    assert not await slave.append_commitlog(start + 1, b"x")
    offset = start
    while offset < master.commitlog_max_offset:
        chunk = master.read_commitlog(offset, 1000)
        assert await slave.append_commitlog(offset, chunk)
        offset += len(chunk)
    await slave.wait_dispatched()
    first_here = next(r for r in results if r.commitlog_offset >= start)
    assert slave.commitlog_min_offset == start
    assert slave.min_offset("T", 0) == first_here.queue_offset
    assert slave.max_offset("T", 0) == 12
    got = slave.get_messages("T", 0, first_here.queue_offset, 100)
    assert [m.queue_offset for m in got.messages] == list(range(first_here.queue_offset, 12))
    assert (await slave.put_message(rec(99))).queue_offset == 12
    await slave.shutdown()
    reopened = store_factory(root=tmp_path / "slave")
    await reopened.start()
    assert reopened.min_offset("T", 0) == first_here.queue_offset
    assert reopened.max_offset("T", 0) == 13


async def test_partial_tail_is_cut_before_a_replica_takes_writes(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    master = store_factory(root=tmp_path / "master")
    slave = store_factory(root=tmp_path / "slave")
    await master.start()
    await slave.start()
    results = await master.put_messages([rec(i) for i in range(3)])
    cut_inside = results[2].commitlog_offset + 10
    assert await slave.append_commitlog(0, master.read_commitlog(0, cut_inside))
    assert slave.complete_offset == results[2].commitlog_offset
    await slave.truncate_commitlog(slave.complete_offset)
    assert slave.commitlog_max_offset == results[2].commitlog_offset
    promoted = await slave.put_message(rec(7))
    assert (promoted.queue_offset, promoted.commitlog_offset) == (2, results[2].commitlog_offset)


async def test_append_listener_sees_each_new_end(store_factory: StoreFactory) -> None:
    store = store_factory()
    ends: list[int] = []
    store.add_append_listener(ends.append)
    await store.start()
    first = await store.put_message(rec(0))
    batch = await store.put_messages([rec(i) for i in range(1, 4)])
    assert ends == [first.next_commitlog_offset, batch[-1].next_commitlog_offset]


async def test_a_replica_taking_over_scans_only_what_it_has_not_dispatched(
        store_factory: StoreFactory, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import mqcluster.store.commitlog as commitlog_module

    master = store_factory(root=tmp_path / "master")
    slave = store_factory(root=tmp_path / "slave")
    await master.start()
    await slave.start()
    results = await master.put_messages([rec(i, queue_id=i % 3) for i in range(30)])

    async def copy_to(end: int) -> None:
        while (offset := slave.commitlog_max_offset) < end:
            assert await slave.append_commitlog(offset, master.read_commitlog(offset,
                                                                              end - offset))

    await copy_to(results[24].next_commitlog_offset)
    await slave.wait_dispatched()
    await copy_to(results[29].commitlog_offset + 10)  # the last record is cut short
    scanned: list[int] = []
    real_scan = commitlog_module.scan

    def counting_scan(files, start, stop, verify_crc=True):  # type: ignore[no-untyped-def]
        for item in real_scan(files, start, stop, verify_crc=verify_crc):
            scanned.append(item[0])
            yield item

    monkeypatch.setattr(commitlog_module, "scan", counting_scan)
    dispatched = slave.dispatched_offset
    assert dispatched >= results[24].next_commitlog_offset
    assert slave.complete_offset == results[29].commitlog_offset
    assert scanned and min(scanned) >= dispatched  # nothing the dispatcher has read
    await slave.truncate_commitlog(slave.complete_offset)
    promoted = await slave.put_messages([rec(100 + q, queue_id=q) for q in range(3)])
    assert [p.queue_offset for p in promoted] == [10, 10, 9]
