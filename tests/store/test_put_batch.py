"""``put_batch`` stores exactly what ``put_messages`` stores, all or nothing."""

from __future__ import annotations

from pathlib import Path

from mqcluster.store import MessageRecord, MessageStore, PutStatus, tags_code
from mqcluster.store.batch import RawBatch
from mqcluster.store.codec import encode_properties, record_properties

from .conftest import StoreFactory, rec


def _raw(recs: list[MessageRecord]) -> RawBatch:
    first = recs[0]
    return RawBatch(
        first.topic, first.queue_id, first.born_host, first.born_timestamp,
        [r.body for r in recs], [encode_properties(record_properties(r)) for r in recs],
        [tags_code(r.tags) for r in recs], [r.flag for r in recs],
    )  # fmt: skip


def _records(n: int, start: int = 0) -> list[MessageRecord]:
    out = []
    for i in range(start, start + n):
        r = rec(i, size=300 + 50 * (i % 3), tags="TagA" if i % 2 else None)
        r.born_timestamp, r.flag = 1_000, i
        out.append(r)
    return out


async def test_same_records_as_put_messages(store_factory: StoreFactory, tmp_path: Path) -> None:
    stores: list[MessageStore] = []
    for name in ("batch", "records"):
        store = store_factory(tmp_path / name)
        await store.start()
        stores.append(store)
    for start in range(0, 40, 8):  # 4 KiB segments: several rolls
        got = await stores[0].put_batch(_raw(_records(8, start)))
        assert got.status is PutStatus.PUT_OK and got.queue_offset == start
        want = await stores[1].put_messages(_records(8, start))
        assert got.commitlog_offsets == [r.commitlog_offset for r in want]
        assert got.next_commitlog_offset == want[-1].next_commitlog_offset
    for store in stores:
        await store.wait_dispatched()
    a = stores[0].get_messages("T", 0, 0, 100).messages
    b = stores[1].get_messages("T", 0, 0, 100).messages
    assert len(a) == len(b) > 0 and stores[0].max_offset("T", 0) == 40
    for x, y in zip(a, b, strict=True):
        assert (x.body, x.tags, x.keys, x.properties, x.queue_offset, x.flag) == (
            y.body, y.tags, y.keys, y.properties, y.queue_offset, y.flag)
        assert x.commitlog_offset == y.commitlog_offset and x.body_crc == y.body_crc


async def test_a_batch_of_more_records_than_one_pwritev_takes(
    store_factory: StoreFactory, tmp_path: Path
) -> None:
    """Two buffers per record: 700 records need more than the 1,024 iovecs of one call."""
    stores: list[MessageStore] = []
    for name in ("batch", "records"):
        store = store_factory(tmp_path / name, mappedFileSizeCommitLog=1 << 20)
        await store.start()
        stores.append(store)
    batch = [rec(i, size=10) for i in range(700)]
    for r in batch:
        r.born_timestamp = 1_000
    got = await stores[0].put_batch(_raw(batch))
    want = await stores[1].put_messages(batch)
    assert got.status is PutStatus.PUT_OK
    assert got.commitlog_offsets == [r.commitlog_offset for r in want]
    end = got.next_commitlog_offset
    assert stores[0]._commitlog.read(0, end) == stores[1]._commitlog.read(0, end)


async def test_one_bad_message_refuses_the_batch(store_factory: StoreFactory) -> None:
    store = store_factory(maxPropertiesSize=64)
    await store.start()
    recs = _records(3)
    recs[1].properties["big"] = "x" * 100
    got = await store.put_batch(_raw(recs))
    assert got.status is PutStatus.PROPERTIES_SIZE_EXCEEDED and not got.commitlog_offsets
    assert store.commitlog_max_offset == 0
    bad_topic = _raw(_records(2))
    bad_topic.topic = "bad topic"
    assert (await store.put_batch(bad_topic)).status is PutStatus.MESSAGE_ILLEGAL
    prepared = _raw(_records(2))
    prepared.sys_flag = 0x1 << 2
    assert (await store.put_batch(prepared)).status is PutStatus.MESSAGE_ILLEGAL
    assert store.commitlog_max_offset == 0


async def test_a_rolled_segment_is_readable_to_its_end(store_factory: StoreFactory,
                                                       tmp_path: Path) -> None:
    """Replication reads raw bytes up to each segment's end, blank filler included."""
    store = store_factory(tmp_path / "roll")
    await store.start()
    for start in range(0, 40, 8):
        assert (await store.put_batch(_raw(_records(8, start)))).status is PutStatus.PUT_OK
    size = store.config.mappedFileSizeCommitLog
    assert store.commitlog_max_offset > size
    offset, total = 0, b""
    while offset < size:
        chunk = store.read_commitlog(offset, 1000)
        assert chunk, f"nothing readable at {offset} of a {size}-byte segment"
        total += chunk
        offset += len(chunk)
    assert offset == size
    await store.shutdown()
