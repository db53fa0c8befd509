"""DLedger's preferred leader and leadership transfer (the transferee catches up first)."""

from __future__ import annotations

import pytest

from mqcluster.raft.types import (
    AppendRequest,
    NotLeaderError,
    RaftConfig,
    Role,
    TimeoutNowRequest,
    TransferInProgressError,
)
from tests.raft.helpers import CONFIG, elect, exchange, new_node, only, sent, settle
from tests.raft.sim import Simulation, run_until_true, stable_leader


def test_transfer_hands_leadership_to_the_target() -> None:
    sim = Simulation(["n0", "n1", "n2"], seed=3)
    leader = stable_leader(sim)
    target = next(n for n in sim.nodes if n != leader.node_id)
    for i in range(5):
        sim.propose(f"x{i}".encode())
    leader.raft.transfer_leadership(target, sim.now)
    assert run_until_true(sim, lambda: sim.nodes[target].raft.role == Role.LEADER, 1.0)
    assert leader.raft.role != Role.LEADER or leader.raft.term < sim.nodes[target].raft.term
    assert sim.propose(b"after") is not None
    new = sim.nodes[target]
    assert run_until_true(sim, lambda: new.raft.commit_index == new.raft.last_index, 1.0)


def test_transfer_waits_until_the_transferee_caught_up_before_timeout_now() -> None:
    nodes = {n: new_node(n) for n in "abc"}
    elect(nodes, "a")
    leader = nodes["a"]
    leader.propose_batch([b"x", b"y"])
    pushes = sent(leader)
    settle(nodes, [m for m in pushes if m.dst == "c"], 0.0)  # b misses them
    leader.transfer_leadership("b", 0.0)
    assert only(sent(leader), TimeoutNowRequest) == []
    with pytest.raises(TransferInProgressError):
        leader.propose(b"refused")
    now = CONFIG.append_retry_timeout
    leader.tick(now)
    messages = sent(leader)
    timeout_now: list[TimeoutNowRequest] = []
    for _ in range(10):
        timeout_now = only(messages, TimeoutNowRequest, "b")
        if timeout_now:
            break
        messages = exchange(nodes, messages, now)
    assert timeout_now, "transferee never got TimeoutNow"
    assert nodes["b"].last_index == leader.last_index  # it was caught up first


def test_timeout_now_makes_the_transferee_campaign_at_the_next_term() -> None:
    nodes = {n: new_node(n) for n in "abc"}
    elect(nodes, "a")
    leader = nodes["a"]
    term = leader.term
    leader.transfer_leadership("b", 0.0)
    messages = sent(leader)
    assert [m.dst for m in only(messages, TimeoutNowRequest)] == ["b"]
    nodes["b"].step(only(messages, TimeoutNowRequest)[0], 0.0)
    follower = nodes["b"]
    assert follower.role == Role.CANDIDATE
    follower.tick(0.001)
    assert follower.term == term + 1
    assert follower.taking_leadership


def test_transfer_times_out_cleanly_when_the_target_cannot_catch_up() -> None:
    sim = Simulation(["n0", "n1", "n2"], seed=5)
    leader = stable_leader(sim)
    target = next(n for n in sim.nodes if n != leader.node_id)
    sim.isolate(target)
    sim.propose(b"x")
    sim.run_until(sim.now + 0.1)
    leader.raft.transfer_leadership(target, sim.now)
    with pytest.raises(TransferInProgressError) as refused:
        leader.raft.propose(b"refused")
    assert refused.value.leader_id == target
    started = sim.now
    sim.run_until(started + sim.config.transfer_timeout + 0.05)
    assert leader.raft.role == Role.LEADER
    assert leader.raft.transferee is None
    index = leader.raft.propose(b"resumed")
    sim.heal()
    assert run_until_true(sim, lambda: all(n.sm.applied >= index for n in sim.nodes.values()), 2.0)
    assert sim.nodes[target].raft.role == Role.FOLLOWER


def test_transfer_to_a_non_voter_is_refused() -> None:
    nodes = {n: new_node(n) for n in "abc"}
    elect(nodes, "a")
    with pytest.raises(ValueError):
        nodes["a"].transfer_leadership("x", 0.0)
    with pytest.raises(NotLeaderError):
        nodes["b"].transfer_leadership("c", 0.0)


def test_preferred_leader_takes_over_once_caught_up() -> None:
    config = RaftConfig(preferred_leader_ids=["n2"], preferred_leader_check_interval=0.2)
    sim = Simulation(["n0", "n1", "n2"], seed=11, config=config)
    sim.isolate("n2")
    leader = stable_leader(sim)
    assert leader.node_id != "n2"
    for i in range(10):
        sim.propose(f"x{i}".encode())
    sim.heal()
    assert run_until_true(sim, lambda: sim.nodes["n2"].raft.role == Role.LEADER, 3.0)
    # And it stays: nobody transfers away from a preferred leader.
    sim.run_until(sim.now + 2.0)
    assert sim.leader() is sim.nodes["n2"]
    assert all_follow_the_leader(sim)


def all_follow_the_leader(sim: Simulation) -> bool:
    leader = sim.leader()
    assert leader is not None
    return all(n.raft.leader_id == leader.node_id for n in sim.nodes.values())


def test_transfer_pushes_entries_to_the_lagging_transferee() -> None:
    nodes = {n: new_node(n) for n in "abc"}
    elect(nodes, "a")
    leader = nodes["a"]
    leader.propose(b"x")
    sent(leader)  # lost
    leader.transfer_leadership("b", 0.0)
    leader.tick(CONFIG.append_retry_timeout)
    assert only(sent(leader), AppendRequest, "b")


def test_a_lost_timeout_now_is_sent_again_until_the_deadline() -> None:
    nodes = {n: new_node(n) for n in "abc"}
    elect(nodes, "a")
    leader = nodes["a"]
    leader.transfer_leadership("b", 0.0)
    assert [m.dst for m in only(sent(leader), TimeoutNowRequest)] == ["b"]  # lost
    leader.tick(CONFIG.append_retry_timeout / 2)
    assert only(sent(leader), TimeoutNowRequest) == []  # not at once
    now = CONFIG.append_retry_timeout
    leader.tick(now)
    again = only(sent(leader), TimeoutNowRequest, "b")
    assert len(again) == 1
    nodes["b"].step(again[0], now)
    assert nodes["b"].role == Role.CANDIDATE
