"""Controller-mode groups in one process: replication, failover, truncation, SyncStateSet."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from mqcluster.admin.commands import fetch_epoch_caches, get_sync_state_set
from mqcluster.admin.ops import clean_broker_metadata
from mqcluster.broker.replicas_manager import ReplicasManager
from mqcluster.ha import master as master_module
from mqcluster.protocol.ha import HAProtocolError, MasterHandshake, Transfer
from mqcluster.store.epoch_file import EpochFileCache
from mqcluster.store.message import MessageRecord, PutStatus
from mqcluster_testing.ha.group import GroupHarness


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


async def put_and_check_replicas(g: GroupHarness, bodies: list[bytes]) -> None:
    """Put ``bodies`` one by one on the master (a frame each); every member ends with the
    master's commitlog, byte for byte."""
    m = await g.wait_master()
    await g.wait_for(lambda: len(g.broker(m).replicas.master.view.members) == 3)  # type: ignore
    results = [await g.put(m, body) for body in bodies]
    assert all(r.status is PutStatus.PUT_OK for r in results)
    end = g.broker(m).context.store.commitlog_max_offset
    for i in range(3):
        await g.wait_for(lambda i=i: g.broker(i).context.store.commitlog_max_offset == end)
    data = commitlog_bytes(g, m, end)
    assert all(commitlog_bytes(g, i, end) == data for i in range(3))


async def test_writes_replicate_to_every_member(group3: GroupHarness) -> None:
    await put_and_check_replicas(group3, [f"m{i}".encode() for i in range(20)])


async def test_large_frames_by_sendfile_and_small_ones_replicate_alike(
        group3: GroupHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    sent_by_sendfile: list[int] = []
    real_sendfile = os.sendfile

    def sendfile(out_fd: int, in_fd: int, offset: int, count: int) -> int:
        sent_by_sendfile.append(count)
        return real_sendfile(out_fd, in_fd, offset, count)

    monkeypatch.setattr(master_module, "SENDFILE_MIN", 2000)  # within maxMessageSize
    monkeypatch.setattr(master_module.os, "sendfile", sendfile)
    await put_and_check_replicas(
        group3, [bytes([65 + i]) * size for i, size in enumerate([10, 5000, 300, 2100, 20])])
    assert sent_by_sendfile and min(sent_by_sendfile) >= 2000  # only the large frames


async def test_sync_flush_acks_only_what_every_member_has_fsynced(tmp_path: Path) -> None:
    g = GroupHarness(tmp_path, 3, flushDiskType="SYNC_FLUSH")
    try:
        await g.start()
        m = await g.wait_master()
        await full_set(g, m)
        for i in range(20):
            r = await g.put(m, f"s{i}".encode() * 50)
            assert r.status is PutStatus.PUT_OK
            end = r.next_commitlog_offset
            assert all(g.broker(b).context.store.flushed_offset >= end for b in range(3))
    finally:
        await g.stop()


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


async def test_malformed_handshake_closes_only_that_connection(group3: GroupHarness) -> None:
    g = group3
    m = await g.wait_master()
    await full_set(g, m)
    host, port = g.configs[m].ha_addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(struct.pack(">iiq", 42, 0, 7))  # state 42 does not exist
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), 5) == b"", "the master closes the connection"
    writer.close()
    assert (await g.put(m, b"still replicating")).ok
    view = g.broker(m).replicas.master.view  # type: ignore[union-attr]
    assert view is not None and len(view.members) == 3


async def test_transfer_that_does_not_follow_restarts_the_handshake(
        group3: GroupHarness) -> None:
    g = group3
    m = await g.wait_master()
    await full_set(g, m)
    assert (await g.put(m, b"before")).ok
    s = next(i for i in range(3) if i != m)
    slave = g.broker(s).replicas.slave  # type: ignore[union-attr]
    assert slave is not None
    store = g.broker(s).context.store
    await g.wait_for(lambda: store.commitlog_max_offset
                     == g.broker(m).context.store.commitlog_max_offset)
    before = store.commitlog_max_offset
    handshakes = slave.handshakes
    bogus = Transfer(before + 4096, 1, 0, 0, b"\x00" * 64)
    with pytest.raises(HAProtocolError, match="does not follow"):
        slave.append(bogus)
    assert store.commitlog_max_offset == before, "nothing is appended"
    # On the wire: the same frame from a fake master makes the slave handshake again.
    fake = await asyncio.start_server(lambda r, w: _send_bogus(r, w, bogus), "127.0.0.1", 0)
    fake_port = fake.sockets[0].getsockname()[1]
    real = slave.master_ha_addr
    await slave.stop()
    slave.master_ha_addr = f"127.0.0.1:{fake_port}"
    slave.start()
    await g.wait_for(lambda: slave.handshakes >= handshakes + 2)
    assert store.commitlog_max_offset == before
    await slave.stop()
    slave.master_ha_addr = real
    slave.start()
    fake.close()
    assert (await g.put(m, b"after")).ok
    await g.wait_for(lambda: store.commitlog_max_offset
                     == g.broker(m).context.store.commitlog_max_offset)


async def _send_bogus(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      bogus: Transfer) -> None:
    await reader.readexactly(16)  # handshake
    writer.write(MasterHandshake(bogus.offset, 1, ((1, 0),)).encode())
    await reader.readexactly(12)  # the slave's offset
    writer.write(bogus.encode())
    await writer.drain()
    with contextlib.suppress(Exception):
        await reader.read()
    writer.close()


async def test_admin_shows_real_epochs_and_sync_state_set(group3: GroupHarness) -> None:
    g = group3
    m = await g.wait_master()
    await full_set(g, m)
    assert (await g.put(m, b"x" * 100)).ok
    end = g.broker(m).context.store.commitlog_max_offset
    await g.wait_for(lambda: all(g.broker(i).context.store.commitlog_max_offset == end
                                 for i in range(3)))
    caches, errors = await fetch_epoch_caches([g.configs[i].broker_addr for i in range(3)])
    assert not errors
    assert {c.cache.max_offset for c in caches} == {end}
    lists = [[(e.epoch, e.start_offset, e.end_offset) for e in c.cache.epoch_list]
             for c in caches]
    assert lists[0] == lists[1] == lists[2] == [(1, 0, end)]
    assert g.controller is not None
    report = await get_sync_state_set(g.controller.self_addr, "group-a", None, None)
    assert "group-a" in report.text
    data = report.data
    text = str(data)
    for i in range(3):
        assert g.configs[i].broker_addr in text


def test_epochs_of_deleted_segments_are_dropped(tmp_path: Path) -> None:
    epochs = EpochFileCache.load(str(tmp_path / "epochs"))
    epochs.append(1, 0)
    epochs.append(2, 5000)

    class Store:
        commitlog_min_offset = 8192
    manager = SimpleNamespace(epochs=epochs, store=Store())
    ReplicasManager.correct_epochs(manager)  # type: ignore[arg-type]
    reloaded = EpochFileCache.load(str(tmp_path / "epochs"))
    assert [(e.epoch, e.start_offset) for e in reloaded.entries] == [(2, 8192)]


async def test_slaves_copy_topics_groups_and_consumer_offsets(group3: GroupHarness) -> None:
    g = group3
    await g.copy_master_metadata()
    for i in range(3):
        assert g.broker(i).context.store.subscriptions.get("SyncedGroup") is not None


async def test_empty_slave_with_sync_from_last_file_starts_at_the_last_file(
        group3: GroupHarness) -> None:
    g = group3
    m = await g.wait_master()
    await full_set(g, m)
    s = next(i for i in range(3) if i != m)
    await g.kill(s)
    await full_set(g, m, 2)
    for _ in range(5):
        store = g.broker(m).context.store
        records = [MessageRecord("TopicHA", 0, b"y" * 60_000) for _ in range(10)]
        assert all(r.ok for r in await store.put_messages(records))
    segment = g.configs[m].mappedFileSizeCommitLog
    end = g.broker(m).context.store.commitlog_max_offset
    assert end > 2 * segment
    shutil.rmtree(g.configs[s].storePathRootDir)
    await g.start_broker(s, syncFromLastFile=True)
    slave_store = g.broker(s).context.store
    await g.wait_for(lambda: slave_store.commitlog_max_offset == end)
    assert slave_store.commitlog_min_offset == end // segment * segment
    await full_set(g, m, 3)


async def test_configured_broker_id_and_role_are_ignored(tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    g = GroupHarness(tmp_path, 1, brokerId=7, brokerRole="SLAVE")
    try:
        with caplog.at_level(logging.WARNING, "mqcluster.broker.replicas_manager"):
            await g.start()
            m = await g.wait_master()
        assert "brokerId, brokerRole ignored" in caplog.text
        assert g.broker(m).context.role.broker_id == 0, "the master registers as brokerId 0"
        assert g.broker(m).replicas.broker_id == 1  # type: ignore[union-attr]
    finally:
        await g.stop()


async def test_clean_broker_metadata_retires_a_dead_replica(tmp_path: Path) -> None:
    g = GroupHarness(tmp_path, 2)
    try:
        await g.start()
        m = await g.wait_master()
        await full_set(g, m, 2)
        gone = 1 - m
        gone_id = g.broker(gone).replicas.broker_id  # type: ignore[union-attr]
        assert gone_id is not None
        await g.kill(gone)
        assert g.controller is not None
        state = g.controller.state
        await g.wait_for(lambda: not g.controller.heartbeats.is_alive(  # type: ignore[union-attr]
            "group-a", gone_id, g.controller.clock_ms()))  # type: ignore[union-attr]
        report = await clean_broker_metadata(g.controller.self_addr, "HACluster", "group-a",
                                             str(gone_id), False)
        assert "clear broker group-a metadata" in report.text
        info = state.replica("group-a")
        assert info is not None and gone_id not in info.brokers
    finally:
        await g.stop()
