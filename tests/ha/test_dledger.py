"""DLedger mode in one process: the Raft log carries the writes, leaders move, replicas
stay identical, nothing uncommitted reaches a store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mqcluster.admin.ops import dledger_status
from mqcluster.broker.dledger import PROPERTY_DLEDGER_INDEX, DLedgerReplication
from mqcluster.client import AdminClient
from mqcluster.ha.dledger_entry import region_start
from mqcluster.raft.types import EntryType
from mqcluster.store.batch import RawBatch
from mqcluster.store.message import PutStatus
from mqcluster_testing.ha.dledger_group import DLedgerGroup
from mqcluster_testing.ha.group import TOPIC, wait_until


@pytest.fixture
async def group(tmp_path: Path) -> AsyncIterator[DLedgerGroup]:
    g = DLedgerGroup(tmp_path)
    try:
        await g.start()
        yield g
    finally:
        await g.stop()


def commitlog(g: DLedgerGroup, i: int) -> bytes:
    store = g.broker(i).context.store
    out = b""
    while len(out) < store.commitlog_max_offset:
        out += store.read_commitlog(len(out), store.commitlog_max_offset - len(out))
    return out


def bodies(g: DLedgerGroup, i: int) -> list[bytes]:
    got = g.broker(i).context.store.get_messages(TOPIC, 0, 0, 1000)
    return [m.body for m in got.messages]


def dispatched(g: DLedgerGroup, i: int) -> int:
    return g.broker(i).context.store.dispatched_offset


async def same_everywhere(g: DLedgerGroup) -> None:
    """Every live replica's commitlog the same, and committed: consumers see all of it
    (a replica writes an entry's records when it appends it, before it commits)."""
    alive = [i for i, b in enumerate(g.brokers) if b is not None]
    await wait_until(lambda: len({g.max_offset(i) for i in alive}) == 1
                     and all(dispatched(g, i) == g.max_offset(i) for i in alive))
    assert len({commitlog(g, i) for i in alive}) == 1


async def test_a_write_is_acknowledged_once_a_majority_has_it(group: DLedgerGroup) -> None:
    g = group
    leader = await g.wait_leader()
    assert g.broker(leader).context.role.broker_id == 0
    for i in range(10):
        assert (await g.put(leader, f"m{i}".encode())).ok
    await same_everywhere(g)
    follower = next(i for i in range(3) if i != leader)
    assert g.broker(follower).context.role.broker_id >= 1
    await wait_until(lambda: g.broker(follower).context.role.master_addr
                     == g.configs[leader].broker_addr)
    assert bodies(g, follower) == [f"m{i}".encode() for i in range(10)], \
        "followers serve reads of committed data"
    refused = await g.put(follower, b"to a follower")
    assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE


async def test_leader_change_and_restart_lose_and_repeat_nothing(group: DLedgerGroup) -> None:
    g = group
    leader = await g.wait_leader()
    for i in range(5):
        assert (await g.put(leader, f"a{i}".encode())).ok
    await g.kill(leader)
    second = await g.wait_leader(not_index=leader)
    for i in range(5):
        assert (await g.put(second, f"b{i}".encode())).ok
    await g.start_broker(leader)
    await same_everywhere(g)
    expected = [f"a{i}".encode() for i in range(5)] + [f"b{i}".encode() for i in range(5)]
    for i in range(3):
        assert bodies(g, i) == expected
    got = g.broker(leader).context.store.get_messages(TOPIC, 0, 0, 100).messages
    positions = [m.properties[PROPERTY_DLEDGER_INDEX] for m in got]
    assert len(set(positions)) == len(positions) == 10


async def test_a_cut_off_leader_acknowledges_nothing_and_loses_its_tail(
        group: DLedgerGroup) -> None:
    g = group
    old = await g.wait_leader()
    assert (await g.put(old, b"before")).ok
    runner = g.broker(old).dledger.runner  # type: ignore[union-attr]
    send = runner._send
    runner._send = lambda messages: None  # its messages no longer reach anyone
    runner.options.propose_timeout = 1.0
    lost = await g.put(old, b"never committed")
    assert lost.status is not PutStatus.PUT_OK
    new = await g.wait_leader(not_index=old)
    assert (await g.put(new, b"after")).ok
    runner._send = send  # heal
    await same_everywhere(g)
    for i in range(3):
        assert bodies(g, i) == [b"before", b"after"]


async def test_leadership_returns_to_the_preferred_replica(tmp_path: Path) -> None:
    g = DLedgerGroup(tmp_path, preferredLeaderIds="n0")
    try:
        await g.start()
        await wait_until(lambda: g.leader() == 0, timeout=30)  # whoever wins first hands over
        assert (await g.put(0, b"x")).ok
        await g.kill(0)
        other = await g.wait_leader(not_index=0)
        assert (await g.put(other, b"y")).ok
        await g.start_broker(0)
        await wait_until(lambda: g.leader() == 0, timeout=30)
        assert (await g.put(0, b"z")).ok
        await same_everywhere(g)
    finally:
        await g.stop()


async def test_mqadmin_shows_each_replicas_term_role_commit_and_ledger_end(
        group: DLedgerGroup) -> None:
    g = group
    leader = await g.wait_leader()
    assert (await g.put(leader, b"x")).ok
    await same_everywhere(g)
    report = await dledger_status(";".join(c.broker_addr for c in g.configs), None, None)
    rows = report.data["replicas"]
    assert sorted(r["role"] for r in rows) == ["FOLLOWER", "FOLLOWER", "LEADER"]
    assert len({r["term"] for r in rows}) == 1
    assert all(r["commitIndex"] >= 1 and r["lastIndex"] >= r["commitIndex"] for r in rows)
    assert "LedgerEnd" in report.text and "LEADER" in report.text
    leader_row = next(r for r in rows if r["role"] == "LEADER")
    assert leader_row["proposedBuilt"] + leader_row["proposedOther"] >= 1  # the put above
    assert "Batches" in report.text and "SingleEntries" in report.text


async def test_a_producer_batch_is_one_entry_stored_alike_on_every_replica(
        group: DLedgerGroup) -> None:
    g = group
    leader = await g.wait_leader()
    first = await g.put_batch(leader, [b"x0", b"x1", b"x2"])
    assert first.status is PutStatus.PUT_OK and first.queue_offset == 0
    assert (await g.put(leader, b"single")).ok  # the other entry layout, in between
    second = await g.put_batch(leader, [b"y0", b"y1"])
    assert second.status is PutStatus.PUT_OK and second.queue_offset == 4
    assert second.commitlog_offsets[0] > first.commitlog_offsets[-1]
    await same_everywhere(g)
    for i in range(3):
        assert bodies(g, i) == [b"x0", b"x1", b"x2", b"single", b"y0", b"y1"]
    got = g.broker(leader).context.store.get_messages(TOPIC, 0, 0, 100).messages
    assert got[0].properties["UNIQ_KEY"] == "x0"
    positions = [m.properties[PROPERTY_DLEDGER_INDEX] for m in got]
    assert [p.split(".")[1] for p in positions] == ["0", "1", "2", "0", "0", "1"]
    follower = next(i for i in range(3) if i != leader)
    refused = await g.put_batch(follower, [b"to a follower"])
    assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE


async def test_an_oversized_batch_is_refused_before_it_enters_the_log(
        group: DLedgerGroup) -> None:
    g = group
    leader = await g.wait_leader()
    runner = g.broker(leader).dledger.runner  # type: ignore[union-attr]
    before = runner.status().last_index
    limit = g.broker(leader).context.store.config.maxMessageSize
    refused = await g.put_batch(leader, [b"ok", b"x" * (limit + 1)])
    assert refused.status is PutStatus.MESSAGE_ILLEGAL
    assert runner.status().last_index == before
    assert bodies(g, leader) == []


async def test_followers_copy_the_leaders_topics(tmp_path: Path) -> None:
    g = DLedgerGroup(tmp_path, slaveSyncInterval=200)
    try:
        await g.start()
        leader = await g.wait_leader()
        async with AdminClient(broker_addr=g.configs[leader].broker_addr) as admin:
            await admin.create_topic("CopiedTopic", queue_nums=2)
        followers = [i for i in range(3) if i != leader]
        await wait_until(lambda: all(g.broker(i).context.store.topics.get("CopiedTopic")
                                     for i in followers))
    finally:
        await g.stop()


def region_entries(g: DLedgerGroup, i: int) -> int:
    """Entries of the leader's log that carry commitlog records."""
    node = g.broker(i).dledger.runner.node  # type: ignore[union-attr]
    return sum(1 for e in node.entries(1, node.last_index)
               if e.type == EntryType.NORMAL and region_start(e.data) is not None)


def entry_of(g: DLedgerGroup, i: int) -> list[str]:
    """The entry index each stored message of the topic came with."""
    got = g.broker(i).context.store.get_messages(TOPIC, 0, 0, 1000).messages
    return [m.properties[PROPERTY_DLEDGER_INDEX].split(".")[0] for m in got]


async def building_leader(g: DLedgerGroup) -> tuple[int, DLedgerReplication]:
    """The leader, once its log is applied (until then a new leader cannot tell where
    records go, and its first writes wait)."""
    leader = await g.wait_leader()
    dl = g.broker(leader).dledger
    assert dl is not None
    await wait_until(lambda: dl.runner.applied_everything)
    return leader, dl


async def test_each_batch_is_one_entry_of_the_leaders_records_stored_alike(
        group: DLedgerGroup) -> None:
    g = group
    leader, _ = await building_leader(g)
    for k in range(6):
        assert (await g.put_batch(leader, [b"b%d-%d" % (k, j) for j in range(4)],
                                  queue=k % 2)).status is PutStatus.PUT_OK
    await same_everywhere(g)
    assert region_entries(g, leader) == 6
    for i in range(3):
        assert len(bodies(g, i)) == 12


async def test_batches_arriving_while_an_entry_is_in_flight_share_the_next_entry(
        group: DLedgerGroup) -> None:
    g = group
    leader, dl = await building_leader(g)
    before = region_entries(g, leader)
    # The first entry's completion reaches the leader only when the test says so, so
    # it stays in flight while three batches arrive in three separate loop turns.
    real_submit = dl.runner.submit
    release = asyncio.Event()
    submitted: list[int] = []

    def submit(datas, timeout=None):  # type: ignore[no-untyped-def]
        done = real_submit(datas, timeout)
        submitted.append(len(datas))
        if len(submitted) > 1:
            return done
        held = asyncio.get_running_loop().create_future()

        async def relay() -> None:
            result = await done
            await release.wait()
            held.set_result(result)

        relays.append(asyncio.create_task(relay()))
        return held

    relays: list[asyncio.Task[None]] = []
    dl.runner.submit = submit  # type: ignore[method-assign]
    first = asyncio.create_task(g.put_batch(leader, [b"first"]))
    await wait_until(lambda: len(submitted) == 1)
    later = []
    for k in range(3):
        later.append(asyncio.create_task(g.put_batch(leader, [b"later-%d" % k])))
        for _ in range(3):
            await asyncio.sleep(0)
    assert len(submitted) == 1, "nothing else proposed while the first entry is in flight"
    release.set()
    results = await asyncio.gather(first, *later)
    assert all(r.status is PutStatus.PUT_OK for r in results)
    assert len(submitted) == 2
    assert region_entries(g, leader) == before + 2
    await same_everywhere(g)
    first_entry, *later_entries = entry_of(g, leader)
    assert len(set(later_entries)) == 1 and later_entries[0] != first_entry
    assert [m.body for m in g.broker(0).context.store.get_messages(TOPIC, 0, 0, 10).messages] \
        == [b"first", b"later-0", b"later-1", b"later-2"]


async def test_batches_sent_together_share_one_entry(group: DLedgerGroup) -> None:
    g = group
    leader, _ = await building_leader(g)
    before = region_entries(g, leader)
    results = await asyncio.gather(*(g.put_batch(leader, [b"c%d-%d" % (k, j) for j in range(3)],
                                                 queue=k % 2) for k in range(8)))
    assert all(r.status is PutStatus.PUT_OK for r in results)
    # every batch got its own consecutive queue offsets, in the order they were taken
    assert sorted(r.queue_offset for r in results[0::2]) == [0, 3, 6, 9]
    assert sorted(r.queue_offset for r in results[1::2]) == [0, 3, 6, 9]
    assert region_entries(g, leader) == before + 1  # one entry for all eight
    await same_everywhere(g)


async def test_a_burst_put_together_enters_in_order_as_one_entry(group: DLedgerGroup) -> None:
    g = group
    leader, _ = await building_leader(g)
    before = region_entries(g, leader)
    store = g.broker(leader).context.store
    limit = store.config.maxMessageSize

    def raw(k: int, body: bytes) -> RawBatch:
        return RawBatch(TOPIC, 0, "127.0.0.1:1", 1_700_000_000_000, [body, body],
                        [b"UNIQ_KEY\x01k%d\x02" % k] * 2, [0, 0], [0, 0])

    batches = [raw(k, b"burst-%d" % k) for k in range(6)]
    batches[3] = raw(3, b"x" * (limit + 1))  # refused in its place, the others go on
    results = await store.put_batches(batches)
    assert [r.status for r in results] == [PutStatus.PUT_OK] * 3 + \
        [PutStatus.MESSAGE_ILLEGAL] + [PutStatus.PUT_OK] * 2
    assert [r.queue_offset for r in results if r.status is PutStatus.PUT_OK] == [0, 2, 4, 6, 8]
    assert region_entries(g, leader) == before + 1
    await same_everywhere(g)
