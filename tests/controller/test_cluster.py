"""Three mqcontroller processes on 127.0.0.x: failover, recovery, broker failover through Raft."""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqcluster.client.controller import ControllerClient, ControllerError
from mqcluster.protocol.controller import ControllerResponseCode as Code
from mqcluster.protocol.controller import ElectMasterRequestHeader, RequestCode, request
from mqcluster.wire.rpc import RpcClient
from mqcluster_testing.controller.localcluster import LocalControllerCluster
from mqcluster_testing.controller.standin import StandInBroker
from mqcluster_testing.procs import free_addr

pytestmark = pytest.mark.slow

CLUSTER = "c1"
GROUP = "broker-a"
RAFT_FAILOVER_S = 4.0


async def _alter(master: StandInBroker, members: set[int], epoch: int) -> int:
    """AlterSyncStateSet; the new SyncStateSet epoch.

    A request retried on another controller after its first attempt committed
    is fenced: then the epoch is read back (the change is in)."""
    try:
        result = await master.client.alter_sync_state_set(GROUP, 1, 1, members, epoch)
    except ControllerError as exc:
        if exc.code != Code.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH:
            raise
        info = await master.replica_info()
        assert info.sync_state_set == members
        return info.sync_state_set_epoch
    return result.sync_state_set_epoch


def _port(addr: str) -> int:
    return int(addr.rpartition(":")[2])


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalControllerCluster]:
    addrs = [free_addr() for _ in range(3)]
    metrics = [_port(free_addr(a.rpartition(":")[0])) for a in addrs]
    c = LocalControllerCluster(
        addrs,
        tmp_path / "controllers",
        metrics_ports=metrics,
        options={"snapshotThreshold": "20", "scanNotActiveBrokerInterval": "200"},
    )
    try:
        c.start_all()
        yield c
    finally:
        c.kill_all()


async def test_active_controller_failover_and_recovery(
    cluster: LocalControllerCluster, tmp_path: Path
) -> None:
    first = await cluster.wait_active(timeout=15)
    await _check_follower_refuses_writes(cluster, first.leader_addr or "")
    a = StandInBroker(cluster.controller_addr, CLUSTER, GROUP, tmp_path / "a")
    b = StandInBroker(cluster.controller_addr, CLUSTER, GROUP, tmp_path / "b")
    try:
        await a.start()
        await b.start()
        # enough log entries for a snapshot (threshold 20) plus a tail
        epoch = 1
        for i in range(30):
            epoch = await _alter(a, {1, 2} if i % 2 == 0 else {1}, epoch)
        before = await a.client.get_sync_state_data([GROUP])

        victim = cluster.node_of(first.leader_addr or "")
        killed_at = time.monotonic()
        cluster.kill(victim)
        second = await cluster.wait_active(timeout=RAFT_FAILOVER_S, exclude={victim})
        assert time.monotonic() - killed_at < RAFT_FAILOVER_S
        assert second.leader_addr != first.leader_addr
        assert second.term > first.term
        # every surviving controller reports the same active controller and group
        metas = [await cluster.metadata(n) for n in cluster.procs]
        assert all(m is not None for m in metas)
        assert {(m.leader_addr, m.leader_id, m.group, m.peers, m.term) for m in metas if m} == {
            (second.leader_addr, second.leader_id, second.group, second.peers, second.term)
        }
        # the replicated state survived, and the client follows the new active controller
        after = await a.client.get_sync_state_data([GROUP])
        assert after.replicas_info_table[GROUP].sync_state_set_epoch == (
            before.replicas_info_table[GROUP].sync_state_set_epoch
        )
        assert after.replicas_info_table[GROUP].master_broker_id == 1
        await _alter(a, {1, 2} if epoch % 2 else {1}, epoch)

        # the killed controller restarts from its store (snapshot + log) and catches up
        cluster.start(victim)
        leader_node = cluster.node_of(second.leader_addr or "")

        async def caught_up() -> bool:
            meta = await cluster.metadata(victim)
            if meta is None or meta.leader_addr != second.leader_addr:
                return False
            h1, h2 = cluster.health(victim), cluster.health(leader_node)
            return bool(h1["stateDigest"] == h2["stateDigest"] and h1["brokerGroups"] == 1)

        deadline = time.monotonic() + 10
        while not await caught_up():
            assert time.monotonic() < deadline, cluster.logs()
            await asyncio.sleep(0.1)
        log_text = cluster.logs()
        assert "snapshot at" in log_text
    finally:
        await a.close()
        await b.close()


async def _check_follower_refuses_writes(cluster: LocalControllerCluster, active: str) -> None:
    # A follower that has heard from the active controller (one just restarted may not
    # have yet, and then answers "active controller is unknown").
    follower = None
    deadline = time.monotonic() + 10
    while follower is None:
        for node, addr in cluster.addrs.items():
            if addr == active:
                continue
            meta = await cluster.metadata(node)
            if meta is not None and meta.leader_addr == active:
                follower = node
        assert time.monotonic() < deadline, cluster.logs()
        if follower is None:
            await asyncio.sleep(0.05)
    rpc = RpcClient()
    try:
        resp = await rpc.invoke(
            cluster.addrs[follower],
            request(
                RequestCode.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader(
                    cluster_name=CLUSTER, broker_name=GROUP, broker_id=1)
            ),
        )
    finally:
        await rpc.close()
    assert resp.code == Code.CONTROLLER_NOT_LEADER
    assert resp.remark == f"not active, active controller is {active}"
    leader = cluster.node_of(active)
    host = active.rpartition(":")[0]
    url = f"http://{host}:{cluster.metrics_ports[leader]}/metrics"
    text = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=2).read().decode())
    assert "mqcontroller_is_leader 1.0" in text
    assert "mqcontroller_term" in text and "mqcontroller_brokers_alive" in text


async def test_hung_master_is_replaced_through_raft(
    cluster: LocalControllerCluster, tmp_path: Path
) -> None:
    await cluster.wait_active(timeout=15)
    a, b, c = (
        StandInBroker(
            cluster.controller_addr, CLUSTER, GROUP, tmp_path / n, epoch=1,
            heartbeat_interval=0.2, heartbeat_timeout_ms=1000,
        )
        for n in "abc"
    )
    admin = ControllerClient(cluster.controller_addr)
    try:
        for x in (a, b, c):
            await x.start()
        info = await a.replica_info()
        assert info.master_broker_id == 1
        await a.client.alter_sync_state_set(GROUP, 1, info.master_epoch, {1, 2}, 1)
        await a.stop_heartbeats()  # hung: connection open, no heartbeats
        async with asyncio.timeout(10):
            await b.notified.wait()
            await c.notified.wait()
        h, members = c.notifications[-1]
        assert (h.master_broker_id, h.master_address, h.master_epoch) == (2, b.addr, 2)
        assert members == {2}
        polled = await c.replica_info()
        assert (polled.master_broker_id, polled.master_epoch, polled.sync_state_set) == (
            2, 2, {2},
        )
        data = await admin.get_sync_state_data([GROUP])
        assert data.replicas_info_table[GROUP].master_address == b.addr
    finally:
        await admin.close()
        for x in (a, b, c):
            await x.close()
