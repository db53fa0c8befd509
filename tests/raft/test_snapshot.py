"""Raft log compaction: InstallSnapshot to a far-behind follower, restart from disk."""

from __future__ import annotations

import pytest

from mqcluster.raft.types import (
    AppendRequest,
    EntryType,
    InstallSnapshotRequest,
    InstallSnapshotResponse,
    Membership,
    Role,
    Snapshot,
    SnapshotMeta,
)
from tests.raft.helpers import entries_with_terms, new_node, one, take
from tests.raft.sim import Simulation, run_until_true, stable_leader


def test_compact_drops_the_log_prefix_and_tells_storage() -> None:
    node = new_node("a", voters=("a",))
    node.tick(0.0)
    node.propose_batch([b"x", b"y", b"z"])
    take(node)
    take(node)
    assert node.commit_index == 4
    node.compact(3, b"state@3")
    assert node.snapshot_index == 3
    assert node.entries(1, 4) == node.entries(4, 4)
    assert node.snapshot is not None and node.snapshot.meta.term == node.term
    assert node.snapshot.meta.membership == Membership(voters=["a"], learners=[])
    assert take(node).compacted_to == 3


def test_compact_beyond_the_applied_index_is_refused() -> None:
    node = new_node("a", voters=("a",))
    node.tick(0.0)
    node.propose(b"x")
    with pytest.raises(ValueError, match="applied"):
        node.compact(2, b"too-early")


def test_leader_sends_install_snapshot_when_the_follower_needs_compacted_entries() -> None:
    sim = Simulation(["n0", "n1", "n2"], seed=4)
    leader = stable_leader(sim)
    lagging = next(n for n in sim.nodes if n != leader.node_id)
    sim.crash(lagging)
    for i in range(40):
        sim.propose(f"x{i}".encode())
        sim.run_until(sim.now + 0.005)
    assert run_until_true(sim, lambda: leader.sm.applied == leader.raft.last_index, 1.0)
    sim.compact(leader.node_id)
    installs: list[InstallSnapshotRequest] = []
    original = sim._send

    def spy(msg: object) -> None:
        if isinstance(msg, InstallSnapshotRequest):
            installs.append(msg)
        original(msg)  # type: ignore[arg-type]

    sim._send = spy  # type: ignore[method-assign]
    sim.restart(lagging)
    node = sim.nodes[lagging]
    assert run_until_true(sim, lambda: node.sm.applied >= leader.sm.applied, 2.0)
    assert installs and installs[0].dst == lagging
    assert node.raft.snapshot_index >= installs[0].snapshot.meta.index
    assert node.sm.digest == leader.sm.digest


def test_install_snapshot_replaces_a_conflicting_log_and_reports_the_snapshot_index() -> None:
    follower = new_node("b", term=3, entries=entries_with_terms(1, 2, 2, 2, 2, 2, 2))
    take(follower)
    meta = SnapshotMeta(index=5, term=3, membership=Membership(voters=["a", "b", "c"]))
    follower.step(
        InstallSnapshotRequest(src="a", dst="b", term=3, snapshot=Snapshot(meta, b"s")), 0.0
    )
    rd = follower.ready()
    assert rd.snapshot is not None and rd.snapshot.meta.index == 5
    assert rd.truncate_from == 6  # storage drops everything the snapshot replaces
    assert rd.committed == []  # the state machine restores from the snapshot instead
    assert one(rd.messages, InstallSnapshotResponse).last_index == 5
    assert (follower.commit_index, follower.last_index) == (5, 5)
    follower.advance(rd)


def test_install_snapshot_keeps_a_matching_suffix() -> None:
    follower = new_node("b", term=3, entries=entries_with_terms(1, 2, 3, 3, 3, 3))
    take(follower)
    meta = SnapshotMeta(index=5, term=3, membership=Membership(voters=["a", "b", "c"]))
    follower.step(
        InstallSnapshotRequest(src="a", dst="b", term=3, snapshot=Snapshot(meta, b"s")), 0.0
    )
    rd = follower.ready()
    assert rd.truncate_from is None
    assert (follower.snapshot_index, follower.last_index) == (5, 6)


def test_follower_treats_entries_below_its_snapshot_as_matching() -> None:
    meta = SnapshotMeta(index=4, term=2, membership=Membership(voters=["a", "b", "c"]))
    follower = new_node("b", term=3, snapshot=Snapshot(meta, b"s"))
    entries = entries_with_terms(1, 1, 2, 2, 3)
    follower.step(
        AppendRequest(src="a", dst="b", term=3, prev_index=1, prev_term=1, entries=entries[1:],
                      commit_index=5),
        0.0,
    )  # fmt: skip
    assert follower.last_index == 5
    assert follower.commit_index == 5


def test_restart_from_snapshot_and_log_tail() -> None:
    meta = SnapshotMeta(index=3, term=2, membership=Membership(voters=["a", "b", "c"]))
    tail = entries_with_terms(1, 1, 2, 2, 3)  # 1..3 are covered by the snapshot
    node = new_node("a", term=3, voted_for="a", snapshot=Snapshot(meta, b"s"), entries=tail)
    assert (node.snapshot_index, node.last_index, node.last_term) == (3, 5, 3)
    assert node.commit_index == 3
    assert node.role == Role.CANDIDATE
    assert node.voted_for == "a"


def test_restart_recovers_membership_from_config_entries_in_the_tail() -> None:
    sim = Simulation(["n0", "n1", "n2"], seed=12)
    leader = stable_leader(sim)
    sim.add_node("n3", Membership(voters=["n0", "n1", "n2"], learners=["n3"]))
    index = leader.raft.add_learner("n3")
    assert run_until_true(sim, lambda: leader.raft.commit_index >= index, 1.0)
    sim.crash(leader.node_id)
    sim.restart(leader.node_id)
    assert sim.nodes[leader.node_id].raft.membership.learners == ["n3"]
    config_entries = [
        e for e in sim.nodes[leader.node_id].durable.entries if e.type == EntryType.CONFIG
    ]
    assert config_entries


def test_whole_group_restart_keeps_every_committed_entry() -> None:
    sim = Simulation(["n0", "n1", "n2"], seed=13)
    stable_leader(sim)
    for i in range(20):
        sim.propose(f"x{i}".encode())
        sim.run_until(sim.now + 0.01)
    sim.compact("n1")
    sim.run_until(sim.now + 0.3)
    committed = dict(sim.checker.committed)
    for node_id in list(sim.nodes):
        sim.crash(node_id)
    for node_id in list(sim.nodes):
        sim.restart(node_id)
    leader = stable_leader(sim)
    top = max(committed)
    assert run_until_true(sim, lambda: all(n.sm.applied >= top for n in sim.nodes.values()), 2.0)
    for index, (term, _) in committed.items():
        got = leader.raft.entries(index, index)
        assert not got or got[0].term == term
