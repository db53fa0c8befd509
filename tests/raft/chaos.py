"""One randomized run: a chaos phase of faults and proposals, then heal and demand progress."""

from __future__ import annotations

import random
from dataclasses import dataclass

from mqcluster.raft.types import Membership, NotLeaderError, RaftConfig
from tests.raft.sim import (
    NetworkFaults,
    SafetyViolation,
    SimNode,
    Simulation,
    check_log_matching,
)

CHAOS_SECONDS = 2.0
STEP = 0.05
LIVENESS_SECONDS = 4.0  # after healing, a proposal must commit everywhere within this


@dataclass
class ChaosResult:
    seed: int
    committed: int
    leaders: int
    healed_after: float  # seconds from healing to the marker applied on every node


def run_chaos(seed: int, size: int) -> ChaosResult:
    rng = random.Random(seed * 7919 + size)
    faults = NetworkFaults(
        min_delay=0.0005,
        max_delay=rng.choice([0.005, 0.02, 0.06]),
        drop=rng.choice([0.0, 0.05, 0.2]),
        duplicate=rng.choice([0.0, 0.05]),
    )
    ids = [f"n{i}" for i in range(size)]
    # Some 5-node runs start with 3 voters and 2 learners and change membership.
    reconfigure = size >= 5 and rng.random() < 0.4
    membership = Membership(voters=ids[:3], learners=ids[3:]) if reconfigure else None
    config = RaftConfig(learner_catch_up_gap=10)
    # Half the runs leave the leader's fsync behind its writes, as the runner does.
    behind = rng.random() < 0.5
    sim = Simulation(ids, seed, config=config, faults=faults, membership=membership,
                     leader_sync_behind=behind)
    counter = 0
    while sim.now < CHAOS_SECONDS:
        roll = rng.random()
        leader = sim.leader()
        victim = leader.node_id if leader and rng.random() < 0.5 else rng.choice(ids)
        if roll < 0.10:
            shuffled = rng.sample(ids, len(ids))
            cut = rng.randint(1, len(ids) - 1)
            sim.partition(shuffled[:cut], shuffled[cut:])
        elif roll < 0.18:
            sim.isolate(victim)
        elif roll < 0.30:
            sim.heal()
        elif roll < 0.38:
            sim.crash(victim)
        elif roll < 0.50:
            dead = [n for n in ids if not sim.nodes[n].alive]
            if dead:
                sim.restart(rng.choice(dead))
        elif roll < 0.60:
            sim.compact(rng.choice(ids))
        if reconfigure and leader is not None and rng.random() < 0.3:
            _change_membership(sim, leader, rng)
        for _ in range(rng.randint(0, 3)):
            counter += 1
            sim.propose(f"{seed}:{counter}".encode())
        sim.run_until(sim.now + STEP)
        if round(sim.now / STEP) % 10 == 0:
            check_log_matching(sim.live())

    sim.heal()
    sim.faults = NetworkFaults(min_delay=0.0005, max_delay=0.005)
    for node_id in ids:
        if not sim.nodes[node_id].alive:
            sim.restart(node_id)
    healed_at = sim.now
    marker: tuple[str, int] | None = None
    data = f"{seed}:marker".encode()
    while sim.now < healed_at + LIVENESS_SECONDS:
        sim.run_until(sim.now + STEP)
        leader = sim.leader()
        if leader is None:
            continue
        if marker is None or _lost(sim, marker, data):
            marker = sim.propose(data)
            continue
        members = leader.raft.membership
        if all(
            _applied(sim, node_id, marker[1], data)
            for node_id in [*members.voters, *members.learners]
        ):
            check_log_matching(sim.live())
            return ChaosResult(
                seed=seed,
                committed=len(sim.checker.committed),
                leaders=len(sim.checker.leaders),
                healed_after=sim.now - healed_at,
            )
    states = {
        n.node_id: (n.raft.role.name, n.raft.term, n.raft.commit_index, n.raft.last_index)
        for n in sim.nodes.values()
    }
    raise SafetyViolation(f"seed {seed}: no progress {LIVENESS_SECONDS}s after healing: {states}")


def _change_membership(sim: Simulation, leader: SimNode, rng: random.Random) -> None:
    """Promote a learner, remove a member, or wipe a non-member and add it back."""
    current = leader.raft.membership
    outsiders = [n for n in sim.nodes if n not in current.voters and n not in current.learners]
    choice = rng.random()
    try:
        if choice < 0.4 and current.learners:
            leader.raft.promote_learner(rng.choice(current.learners))
        elif choice < 0.7:
            removable = [n for n in current.learners if n != leader.node_id]
            if len(current.voters) > 3:
                removable += [n for n in current.voters if n != leader.node_id]
            if removable:
                leader.raft.remove_member(rng.choice(removable))
        elif outsiders:
            node_id = rng.choice(outsiders)
            # Raft membership: clear a removed node and add it back, but only once
            # every member has applied its removal. A member still counting it as a voter
            # (e.g. one partitioned through several changes) could otherwise win an
            # election with the blank node's vote and without the committed entries.
            if any(
                node_id in sim.membership_view(other).voters
                for other in sim.nodes if other != node_id
            ):
                return
            leader.raft.add_learner(node_id)
            joined = Membership(voters=current.voters, learners=[*current.learners, node_id])
            sim.wipe(node_id, joined)
    except (ValueError, NotLeaderError):
        return  # not caught up, or a change still pending: the run goes on
    sim.drain(leader)


def _lost(sim: Simulation, marker: tuple[str, int], data: bytes) -> bool:
    """The marker's entry was overwritten, or its leader lost office before committing it."""
    committed = sim.checker.committed.get(marker[1])
    if committed is not None:
        return committed[1] != data
    leader = sim.nodes[marker[0]]
    return not leader.alive or leader.raft.role.name != "LEADER"


def _applied(sim: Simulation, node_id: str, index: int, data: bytes) -> bool:
    node = sim.nodes[node_id]
    return node.sm.applied >= index and sim.checker.committed.get(index, (0, b""))[1] == data
