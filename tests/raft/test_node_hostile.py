"""Hostile Raft frames against an in-process group: each is refused with its own
connection, and no member changes term, stops or writes it to its hard state."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mqcluster.raft.diskformat import decode_hard_state
from mqcluster.raft.node import RunnerOptions
from mqcluster_testing.procs import free_addr
from tests.raft.hostile import heartbeat_frame, send_frames
from tests.raft.test_node import Group


@pytest.fixture
async def group(tmp_path: Path) -> AsyncIterator[Group]:
    g = Group(tmp_path, RunnerOptions(snapshot_every=0))
    await g.start_all()
    try:
        yield g
    finally:
        await g.stop_all()


def _host(addr: str) -> str:
    return addr.rpartition(":")[0]


@pytest.mark.parametrize(
    ("from_peer_host", "term", "extra"),
    [
        (False, 1000, {}),  # in range, but from no peer's host
        (True, 2**64, {}),  # the reported frame, from the claimed peer's own host
        (True, 2**63, {}),
        (True, -1, {}),
        (True, "1e3", {}),
        (True, 5, {"src": "n9"}),  # no configured peer
        (True, 5, {"round": "True"}),
        (True, 5, {"commit_index": "9" * 30}),
    ],
)
async def test_a_refused_frame_closes_its_connection_and_changes_nothing(
    group: Group, from_peer_host: bool, term: int | str, extra: dict[str, str]
) -> None:
    leader = await group.leader()
    peer = next(n for n in group.peers if n != leader.node_id)
    source = _host(group.peers[peer]) if from_peer_host else _host(free_addr())
    if not from_peer_host:
        while source == _host(group.peers[peer]):
            source = _host(free_addr())
    frame = heartbeat_frame(extra.pop("src", peer), leader.node_id, term, **extra)
    assert await send_frames(group.peers[leader.node_id], [frame, frame], source_host=source)
    assert leader.stats.refused_connections == 1
    # No member took the frame's term (a loaded machine may still hold an election of
    # the group's own, far below 1000), stopped, or saved it.
    for nid, runner in group.runners.items():
        assert runner.failure is None
        assert runner.status().term < 1000
        hs = decode_hard_state((group.root / nid / "hardstate").read_bytes(), Path(nid))
        assert hs.term < 1000
    # The group still takes writes.
    await (await group.leader()).propose(b"after the frame")


async def test_a_peers_valid_heartbeat_is_taken(group: Group) -> None:
    """The gate lets a peer's own messages through: the group keeps its leader."""
    leader = await group.leader()
    peer = next(n for n in group.peers if n != leader.node_id)
    term = leader.status().term
    frame = heartbeat_frame(peer, leader.node_id, term)
    assert not await send_frames(group.peers[leader.node_id], [frame],
                                 source_host=_host(group.peers[peer]))
    assert leader.stats.refused_connections == 0
