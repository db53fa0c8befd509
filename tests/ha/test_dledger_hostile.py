"""Hostile Raft frames against a DLedger broker group of real processes.

Reported: one HEARTBEAT_REQUEST (code 2003) with ``term`` = 2**64 to a DLedger group's
Raft port left every replica answering "is a slave" for good; a term of 1000 from any
address forced a re-election each time it was sent.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mqcluster.raft.diskformat import encode_hard_state
from mqcluster.raft.node import parse_peers
from mqcluster.raft.types import HardState
from mqcluster_testing.ha.brokers import running
from mqcluster_testing.ha.dledger_cluster import DLedgerProcessGroup
from mqcluster_testing.procs import Procs, procs  # noqa: F401  (``procs`` is a fixture)
from tests.ha.lone_member import refused_start
from tests.ha.test_processes import History, produce, wait_acks
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


@pytest.fixture
async def group(tmp_path: Path) -> AsyncIterator[DLedgerProcessGroup]:
    g = DLedgerProcessGroup(tmp_path)
    async with running(g, g.wait_leader):
        yield g


def _views(g: DLedgerProcessGroup) -> Views:
    async def views() -> list[View]:
        sts = [await g.status(i) for i in range(len(g.brokers))]
        return [None if s is None else (s["leader"], s["term"]) for s in sts]
    return views


async def _settled(g: DLedgerProcessGroup) -> tuple[str, int]:
    return await settled(_views(g))


async def _unmoved(g: DLedgerProcessGroup) -> None:
    await unmoved(_views(g), [f"replica {i}" for i in range(len(g.brokers))], g.logs)


async def test_hostile_frames_leave_the_group_writable_and_restartable(
    group: DLedgerProcessGroup,
) -> None:
    g = group
    peers = parse_peers(g.peers)
    await _settled(g)
    other = {n: next(p for p in g.ids if p != n) for n in g.ids}
    stranger = stranger_host(peers.values())

    # term=1000 from an address that is no peer's, claiming a peer's id: ignored.
    for _ in range(3):
        for n in g.ids:
            await send_frames(peers[n], [heartbeat_frame(other[n], n, 1000)],
                              source_host=stranger)
    # The reported frame, from anywhere and from the claimed peer's own host.
    for n in g.ids:
        frame = heartbeat_frame(other[n], n, 2**64)
        await send_frames(peers[n], [frame])
        assert await send_frames(peers[n], [frame], source_host=host_of(peers[other[n]]))
    await _unmoved(g)

    history = History()
    worker = threading.Thread(target=produce, args=(g.endpoints, history), daemon=True)
    worker.start()
    try:
        await wait_acks(history, 10)
        # Every replica restarts from its store and the group serves writes again.
        await g.stop_brokers()
        for i in range(len(g.brokers)):
            await g.restart(i)
        await _settled(g)
        await wait_acks(history, len(history.acked) + 10)
    finally:
        history.stop.set()
        await asyncio.to_thread(worker.join, 30)
    logs = g.logs()
    assert "raft driver failed" not in logs
    assert "closing Raft connection" in logs


def test_a_hardstate_out_of_range_stops_the_broker_with_one_line(
    tmp_path: Path, procs: Procs  # noqa: F811
) -> None:
    """As an older version saved the reported frame's term: one line naming the file."""
    raft_dir = tmp_path / "store" / "dledger"
    raft_dir.mkdir(parents=True)
    (raft_dir / "hardstate").write_bytes(encode_hard_state(HardState(2**64, "n1")))
    out = refused_start(tmp_path, procs)
    assert f"corrupt file {raft_dir / 'hardstate'}: term: {2**64} is out of range" in out, out
