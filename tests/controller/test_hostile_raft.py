"""Hostile Raft frames against three real mqcontroller processes.

The reported frame: one unauthenticated HEARTBEAT_REQUEST (code 2003) with
``term`` = 2**64 to the active controller stopped two of three members for good
(``struct.error`` in the driver, the term kept in ``hardstate``), so no master
could be elected any more, even after restarting every controller. A term of
1000 from any address forced a re-election each time it was sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqcluster.client.controller import ControllerClient
from mqcluster.raft.diskformat import encode_hard_state
from mqcluster.raft.types import HardState
from mqcluster_testing.controller.localcluster import LocalControllerCluster
from mqcluster_testing.controller.standin import StandInBroker
from mqcluster_testing.procs import free_addr
from tests.raft.hostile import (
    View,
    Views,
    heartbeat_frame,
    host_of,
    send_frames,
    settled,
    stranger_host,
    unmoved,
)

pytestmark = pytest.mark.slow

CLUSTER = "c1"
GROUP = "broker-h"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalControllerCluster]:
    c = LocalControllerCluster(
        [free_addr() for _ in range(3)],
        tmp_path / "controllers",
        options={"scanNotActiveBrokerInterval": "200", "enableElectUncleanMaster": "true"},
    )
    try:
        c.start_all()
        yield c
    finally:
        c.kill_all()


def _views(cluster: LocalControllerCluster) -> Views:
    async def views() -> list[View]:
        metas = [await cluster.metadata(node) for node in cluster.ids]
        return [None if m is None else (m.leader_id, m.term) for m in metas]
    return views


async def _settled(cluster: LocalControllerCluster) -> tuple[str, int]:
    return await settled(_views(cluster))


async def _unmoved(cluster: LocalControllerCluster) -> None:
    await unmoved(_views(cluster), list(cluster.ids), cluster.logs)


async def _new_master(brokers: list[StandInBroker], old: int) -> StandInBroker:
    async with asyncio.timeout(45):
        while True:
            for b in brokers:
                if b.notifications and b.notifications[-1][0].master_broker_id not in (None, old):
                    master_id = b.notifications[-1][0].master_broker_id
                    return next(x for x in brokers if x.broker_id == master_id)
            await asyncio.sleep(0.05)


async def test_reported_frame_leaves_group_electing_and_restartable(
    cluster: LocalControllerCluster, tmp_path: Path
) -> None:
    active, _ = await _settled(cluster)
    followers = [n for n in cluster.ids if n != active]
    brokers = [
        StandInBroker(cluster.controller_addr, CLUSTER, GROUP, tmp_path / n,
                      heartbeat_interval=0.2, heartbeat_timeout_ms=1000)
        for n in "abc"
    ]
    admin = ControllerClient(cluster.controller_addr)
    try:
        for b in brokers:
            await b.start()
        master = brokers[0]
        assert (await master.replica_info()).master_broker_id == master.broker_id

        # The reported frame, from anywhere, and from a follower's own host claiming
        # that follower's id (so the range check is met, not only the peer check).
        frame = heartbeat_frame(followers[0], active, 2**64)
        await send_frames(cluster.addrs[active], [frame])
        closed = await send_frames(cluster.addrs[active], [frame],
                                   source_host=host_of(cluster.addrs[followers[0]]))
        assert closed, "a member closes the connection that sent an out-of-range term"
        for node in followers:
            await send_frames(cluster.addrs[node], [heartbeat_frame(active, node, 2**64)],
                              source_host=host_of(cluster.addrs[active]))
        await _unmoved(cluster)
        assert "raft driver failed" not in cluster.logs()

        # A killed master is replaced.
        await master.close()
        master = await _new_master(brokers[1:], old=brokers[0].broker_id)

        # Every controller restarts from its store and elects again.
        cluster.kill_all()
        cluster.start_all()
        again = await cluster.wait_active(timeout=60)
        assert again.term < 2**63
        old = master.broker_id
        await master.close()
        survivor = await _new_master([b for b in brokers[1:] if b is not master], old=old)
        info = await admin.get_replica_info(GROUP)
        assert (info.master_broker_id, info.master_address) == (survivor.broker_id,
                                                                survivor.addr)
        assert "raft driver failed" not in cluster.logs()
    finally:
        await admin.close()
        for b in brokers:
            await b.close()


async def test_bigger_term_from_a_non_peer_forces_no_election(
    cluster: LocalControllerCluster,
) -> None:
    active, _ = await _settled(cluster)
    followers = [n for n in cluster.ids if n != active]
    stranger = stranger_host(cluster.addrs.values())
    for _ in range(3):
        for node in cluster.ids:
            src = followers[0] if node == active else active
            await send_frames(cluster.addrs[node], [heartbeat_frame(src, node, 1000)],
                              source_host=stranger)
    await _unmoved(cluster)


def test_hardstate_out_of_range_stops_start_with_one_line(tmp_path: Path) -> None:
    """A hardstate an older version saved from such a frame: one line naming the file."""
    c = LocalControllerCluster([free_addr() for _ in range(3)], tmp_path / "controllers")
    store = tmp_path / "controllers" / "n0" / "store"
    store.mkdir(parents=True)
    (store / "hardstate").write_bytes(encode_hard_state(HardState(term=2**64, voted_for="n1")))
    try:
        p = c.start("n0")
        assert p.wait(timeout=90) == 1
    finally:
        c.kill_all()
    out = c.logs()
    errors = [line for line in out.splitlines() if line.startswith("mqcontroller:")]
    assert errors == [f"mqcontroller: cannot start: corrupt file {store / 'hardstate'}: "
                      f"term: {2**64} is out of range 0..{2**63 - 1}"], out
    assert "Traceback" not in out
