"""Controller-mode groups in one process: replication, failover, truncation, SyncStateSet."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mqcluster.store.message import PutStatus
from tests.ha.group import GroupHarness


@pytest.fixture
async def group3(tmp_path: Path) -> AsyncIterator[GroupHarness]:
    g = GroupHarness(tmp_path, 3)
    try:
        await g.start()
        yield g
    finally:
        await g.stop()


def commitlog_bytes(g: GroupHarness, i: int, end: int) -> bytes:
    store = g.broker(i).context.store
    out = b""
    while len(out) < end:
        chunk = store.read_commitlog(len(out), end - len(out))
        assert chunk, f"replica {i} has only {len(out)} of {end} bytes"
        out += chunk
    return out


async def test_writes_replicate_to_every_member(group3: GroupHarness) -> None:
    g = group3
    m = await g.wait_master()
    await g.wait_for(lambda: len(g.broker(m).replicas.master.view.members) == 3)  # type: ignore
    results = [await g.put(m, f"m{i}".encode()) for i in range(20)]
    assert all(r.status is PutStatus.PUT_OK for r in results)
    end = g.broker(m).context.store.commitlog_max_offset
    for i in range(3):
        await g.wait_for(lambda i=i: g.broker(i).context.store.commitlog_max_offset == end)
    data = commitlog_bytes(g, m, end)
    assert all(commitlog_bytes(g, i, end) == data for i in range(3))


def epochs_of(g: GroupHarness, i: int) -> list[tuple[int, int]]:
    replicas = g.broker(i).replicas
    assert replicas is not None
    return [(e.epoch, e.start_offset) for e in replicas.epochs.entries]


async def full_set(g: GroupHarness, m: int, size: int = 3) -> None:
    def ok() -> bool:
        view = g.broker(m).replicas.master.view  # type: ignore[union-attr]
        return view is not None and len(view.members) == size
    await g.wait_for(ok)


async def test_failover_loses_no_acknowledged_write(group3: GroupHarness) -> None:
    g = group3
    m = await g.wait_master()
    await full_set(g, m)
    acked = [r for i in range(30) if (r := await g.put(m, f"a{i}".encode())).ok]
    assert len(acked) == 30
    await g.kill(m)
    m2 = await g.wait_master()
    assert m2 != m
    more = [r for i in range(30) if (r := await g.put(m2, f"b{i}".encode())).ok]
    assert len(more) == 30
    await g.start_broker(m)
    end = g.broker(m2).context.store.commitlog_max_offset
    await g.wait_for(lambda: all(g.broker(i).context.store.commitlog_max_offset == end
                                 for i in range(3)))
    data = commitlog_bytes(g, m2, end)
    assert all(commitlog_bytes(g, i, end) == data for i in range(3))
    assert epochs_of(g, 0) == epochs_of(g, 1) == epochs_of(g, 2)
    assert len(epochs_of(g, m2)) == 2
    store = g.broker(m2).context.store
    await g.wait_for(lambda: store.max_offset("TopicHA", 0) == 60)


async def test_demoted_master_truncates_its_unreplicated_tail(group3: GroupHarness) -> None:
    g = group3
    m = await g.wait_master()
    await full_set(g, m)
    assert (await g.put(m, b"kept")).ok
    master = g.broker(m).replicas.master  # type: ignore[union-attr]

    async def controller_unreachable(_members: set[int]) -> None:
        await asyncio.Event().wait()

    master.report = controller_unreachable
    for i in range(3):  # cut the slaves off the master's stream
        if i != m:
            await g.broker(i).replicas.slave.stop()  # type: ignore[union-attr]
    lost = await g.put(m, b"never acknowledged")
    assert lost.status is PutStatus.FLUSH_SLAVE_TIMEOUT
    old_store = g.broker(m).context.store
    assert old_store.max_offset("TopicHA", 0) == 1, "no consumer may see the unacked message"
    tail_end = old_store.commitlog_max_offset
    await g.kill(m)
    m2 = await g.wait_master()
    assert (await g.put(m2, b"after failover")).ok
    await g.start_broker(m)
    end = g.broker(m2).context.store.commitlog_max_offset
    await g.wait_for(lambda: g.broker(m).context.store.commitlog_max_offset == end)
    assert commitlog_bytes(g, m, end) == commitlog_bytes(g, m2, end)
    assert tail_end > 0
    assert b"never acknowledged" not in commitlog_bytes(g, m, end)
    assert epochs_of(g, m) == epochs_of(g, m2)


async def test_laggard_leaves_the_sync_state_set_and_rejoins(group3: GroupHarness) -> None:
    g = group3
    m = await g.wait_master()
    await full_set(g, m)
    s = next(i for i in range(3) if i != m)
    slave = g.broker(s).replicas.slave  # type: ignore[union-attr]
    assert slave is not None
    await slave.stop()
    await full_set(g, m, 2)
    assert (await g.put(m, b"two acks suffice now")).ok
    slave.state = slave.state.READY
    slave._task = None
    slave.start()
    await full_set(g, m, 3)
    end = g.broker(m).context.store.commitlog_max_offset
    assert g.broker(s).context.store.commitlog_max_offset == end


async def test_min_in_sync_replicas_refusal(tmp_path: Path) -> None:
    g = GroupHarness(tmp_path, 2, minInSyncReplicas=2, inSyncReplicas=2,
                     allAckInSyncStateSet=False)
    try:
        await g.start()
        m = await g.wait_master()
        await full_set(g, m, 2)
        assert (await g.put(m, b"both have it")).ok
        await g.kill(1 - m)
        await full_set(g, m, 1)
        refused = await g.put(m, b"nobody to copy it")
        assert refused.status is PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH
        assert "minInSyncReplicas=2" in refused.remark
    finally:
        await g.stop()


async def test_async_learner_never_joins_nor_leads(tmp_path: Path) -> None:
    g = GroupHarness(tmp_path, 2)
    try:
        await g.start()
        m = await g.wait_master()
        learner = 1 - m
        await g.kill(learner)
        await g.start_broker(learner, asyncLearner=True)
        await full_set(g, m, 1)
        assert (await g.put(m, b"learners copy too")).ok
        end = g.broker(m).context.store.commitlog_max_offset
        await g.wait_for(lambda: g.broker(learner).context.store.commitlog_max_offset == end)
        view = g.broker(m).replicas.master.view  # type: ignore[union-attr]
        assert view is not None and view.members == {view.master_id}
        await g.kill(m)
        controller = g.controller
        assert controller is not None
        await controller.scan_once()
        assert g.master_index() is None, "an async learner is never elected"
    finally:
        await g.stop()
