"""WATCH_MASTERS on real controllers: held while nothing changes, answered when an
election is applied (not at its timeout), refused with a clear reason when malformed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mqcluster.client.controller import ControllerClient
from mqcluster.protocol import controller_watch as watch
from mqcluster.wire.frame import RemotingCommand
from mqcluster_testing.controller.localcluster import LocalControllerCluster
from mqcluster_testing.controller.standin import StandInBroker
from mqcluster_testing.procs import free_addr

pytestmark = pytest.mark.slow

GROUP = "watched"
HELD_MS = 25_000


@pytest.fixture
async def controllers(tmp_path: Path) -> AsyncIterator[LocalControllerCluster]:
    cluster = LocalControllerCluster([free_addr() for _ in range(3)], tmp_path / "c",
                                     options={"scanNotActiveBrokerInterval": "200"})
    cluster.start_all()
    try:
        await cluster.wait_active(30)
        yield cluster
    finally:
        cluster.kill_all()


async def ask(client: ControllerClient, body: bytes) -> RemotingCommand:
    return await client.invoke_active(
        lambda: RemotingCommand(code=watch.WATCH_MASTERS, body=body))


async def test_the_watch_answers_when_a_new_master_is_elected(
        controllers: LocalControllerCluster, tmp_path: Path) -> None:
    addr = controllers.controller_addr
    brokers = [StandInBroker(addr, "C", GROUP, tmp_path / f"b{i}",
                             host=free_addr().rpartition(":")[0], epoch=1,
                             heartbeat_interval=0.2, heartbeat_timeout_ms=1000)
               for i in range(2)]
    client = ControllerClient(addr, timeout=HELD_MS / 1000 + 5, retry_timeout=10)
    try:
        for b in brokers:
            await b.start()
        first = await client.watch_masters({}, 0)
        master = first[GROUP]
        old = next(b for b in brokers if b.addr == master.master_address)
        other = next(b for b in brokers if b is not old)
        info = await other.replica_info()  # both in sync: the other may be elected
        await other.client.alter_sync_state_set(GROUP, old.broker_id, info.master_epoch,
                                                {old.broker_id, other.broker_id},
                                                info.sync_state_set_epoch)
        assert master.master_address in {b.addr for b in brokers}
        assert set(master.replicas) == {b.addr for b in brokers}
        known = {GROUP: master.master_epoch}
        held = asyncio.ensure_future(client.watch_masters(known, HELD_MS))
        await asyncio.sleep(0.5)
        assert not held.done()  # nothing changed: the controller holds the answer
        await old.stop_heartbeats()  # the master goes silent; another is elected
        answer = await asyncio.wait_for(held, HELD_MS / 1000 - 5)  # well before its timeout
        now = answer[GROUP]
        assert now.master_epoch > master.master_epoch
        assert now.master_address == other.addr
    finally:
        for b in brokers:
            await b.close()
        await client.close()


async def test_a_malformed_watch_is_refused_naming_the_field(
        controllers: LocalControllerCluster) -> None:
    client = ControllerClient(controllers.controller_addr, retry_timeout=10)
    try:
        resp = await ask(client, b'{"known": {"g": "1"}}')
    finally:
        await client.close()
    assert resp.code != 0 and "'known'" in (resp.remark or "")


async def test_watches_past_the_limit_are_refused_busy(
        controllers: LocalControllerCluster) -> None:
    from mqcluster.controller.watch import MAX_WATCHERS

    body = watch.encode_request({}, HELD_MS)
    clients = [ControllerClient(controllers.controller_addr, retry_timeout=10)
               for _ in range(4)]
    try:
        # no group is known and none exists: nothing differs, so every watch is held
        held = [asyncio.ensure_future(ask(clients[i % 4], body))
                for i in range(MAX_WATCHERS)]
        await asyncio.sleep(1.0)
        assert not any(h.done() for h in held)  # every one of them is held
        extra = await ask(clients[0], body)
        assert extra.code != 0 and "too many master watches" in (extra.remark or "")
        for h in held:
            h.cancel()
    finally:
        for c in clients:
            await c.close()
