"""Raft membership changes: add a learner, promote it once caught up, remove a member safely."""

from __future__ import annotations

import pytest

from mqcluster.raft.membership import decode_membership, encode_membership
from mqcluster.raft.types import (
    AppendRequest,
    Entry,
    EntryType,
    Membership,
    NotLeaderError,
    Role,
    VoteRequest,
    VoteResponse,
    VoteResponseCode,
)
from tests.raft.helpers import elect, entries_with_terms, new_node, one, sent, settle
from tests.raft.sim import Simulation, run_until_true, stable_leader


def test_membership_round_trips_through_a_config_entry() -> None:
    membership = Membership(voters=["a", "b"], learners=["c"])
    assert decode_membership(encode_membership(membership)) == membership


def test_learner_catches_up_then_becomes_a_voter() -> None:
    sim = Simulation(["n0", "n1", "n2"], seed=21)
    leader = stable_leader(sim)
    for i in range(30):
        sim.propose(f"x{i}".encode())
    sim.add_node("n3", Membership(voters=["n0", "n1", "n2"], learners=["n3"]))
    leader.raft.add_learner("n3")
    learner = sim.nodes["n3"]

    def caught_up() -> bool:
        return leader.raft.match_index("n3") == leader.raft.last_index

    assert run_until_true(sim, caught_up, 2.0)
    assert learner.raft.role == Role.LEARNER
    assert run_until_true(sim, lambda: leader.raft.commit_index == leader.raft.last_index, 1.0)
    index = leader.raft.promote_learner("n3")
    assert run_until_true(sim, lambda: learner.raft.commit_index >= index, 2.0)
    assert learner.raft.role.name == "FOLLOWER"  # a voter now
    assert sorted(leader.raft.membership.voters) == ["n0", "n1", "n2", "n3"]
    # Four voters need three: with two down, nothing more commits.
    others = [n for n in ["n0", "n1", "n2"] if n != leader.node_id]
    sim.crash(others[0])
    sim.crash(others[1])
    stuck = leader.raft.propose(b"needs-three")
    sim.run_until(sim.now + 0.2)
    assert leader.raft.commit_index < stuck


def test_learner_does_not_count_towards_the_quorum() -> None:
    nodes = {n: new_node(n, voters=("a", "b", "c")) for n in "abc"}
    elect(nodes, "a")
    leader = nodes["a"]
    nodes["d"] = new_node("d", voters=("a", "b", "c"), learners=("d",), term=leader.term)
    leader.add_learner("d")
    settle(nodes, sent(leader), 0.0)
    assert sorted(leader.membership.learners) == ["d"]
    index = leader.propose(b"x")
    pushes = sent(leader)
    settle(nodes, [m for m in pushes if m.dst == "d"], 0.0)
    assert nodes["d"].last_index == index
    assert leader.commit_index < index  # a and d hold it, but d does not vote


def test_promote_is_refused_until_the_learner_caught_up() -> None:
    nodes = {n: new_node(n) for n in "abc"}
    elect(nodes, "a")
    leader = nodes["a"]
    leader.add_learner("d")
    settle(nodes, sent(leader), 0.0)  # d does not exist: it never answers
    with pytest.raises(ValueError, match="caught up"):
        leader.promote_learner("d")


def test_only_one_membership_change_may_be_uncommitted() -> None:
    nodes = {n: new_node(n) for n in "abc"}
    elect(nodes, "a")
    leader = nodes["a"]
    leader.add_learner("d")
    with pytest.raises(ValueError, match="uncommitted"):
        leader.add_learner("e")


def test_leader_cannot_remove_itself() -> None:
    nodes = {n: new_node(n) for n in "abc"}
    elect(nodes, "a")
    with pytest.raises(ValueError, match="transfer"):
        nodes["a"].remove_member("a")
    with pytest.raises(NotLeaderError):
        nodes["b"].remove_member("c")


def test_configuration_takes_effect_on_append_and_reverts_on_truncation() -> None:
    follower = new_node("b", term=2, entries=entries_with_terms(1))
    config = Entry(
        index=2, term=1, type=EntryType.CONFIG,
        data=encode_membership(Membership(voters=["a", "b", "c", "d"])),
    )  # fmt: skip
    follower.step(
        AppendRequest(src="a", dst="b", term=2, prev_index=1, prev_term=1, entries=[config],
                      commit_index=0),
        0.0,
    )  # fmt: skip
    assert follower.membership.voters == ["a", "b", "c", "d"]
    replacement = Entry(index=2, term=2, type=EntryType.NORMAL, data=b"x")
    follower.step(
        AppendRequest(src="a", dst="b", term=2, prev_index=1, prev_term=1,
                      entries=[replacement], commit_index=0),
        0.0,
    )  # fmt: skip
    assert follower.membership.voters == ["a", "b", "c"]


def test_removed_node_votes_are_rejected_as_unknown() -> None:
    voter = new_node("b", voters=("a", "b", "c"), term=3)
    voter.step(VoteRequest(src="d", dst="b", term=9, ledger_end_index=99, ledger_end_term=9), 0.0)
    answer = one(sent(voter), VoteResponse, "d")
    assert answer.code == VoteResponseCode.REJECT_UNKNOWN_LEADER
    assert voter.term == 3 and not voter.need_increase_term_immediately


def test_removed_node_cannot_disrupt_the_group() -> None:
    sim = Simulation(["n0", "n1", "n2", "n3"], seed=8)
    leader = stable_leader(sim)
    victim = next(n for n in ["n3", "n2"] if n != leader.node_id)
    sim.isolate(victim)  # it never learns it was removed
    index = leader.raft.remove_member(victim)
    assert run_until_true(sim, lambda: leader.raft.commit_index >= index, 2.0)
    term = leader.raft.term
    victim_term = sim.nodes[victim].raft.term
    sim.heal()
    sim.run_until(sim.now + 3.0)
    # Nobody knows it any more, so its rounds have no valid answers: no new terms.
    assert sim.nodes[victim].raft.term == victim_term
    assert sim.nodes[victim].raft.role == Role.CANDIDATE  # it keeps trying, harmlessly
    assert leader.raft.role == Role.LEADER
    assert leader.raft.term == term
    assert victim not in leader.raft.membership.voters
    assert sim.propose(b"still-serving") is not None
