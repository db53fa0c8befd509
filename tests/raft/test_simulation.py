"""Randomized simulation: 2,000 seeded runs of 3- and 5-node groups under faults.

Each run checks, as it goes, election safety (one leader per term), state-machine
safety (one entry per index across nodes, equal state digests, snapshots
included) and leader completeness (a new leader holds every committed entry);
at the end log matching, and liveness: after healing, a proposal commits on every
member within LIVENESS_SECONDS.
"""

from __future__ import annotations

import pytest

from mqcluster.raft.types import RaftConfig
from tests.raft.chaos import LIVENESS_SECONDS, run_chaos
from tests.raft.sim import Simulation, run_until_true, stable_leader

THREE_NODE_SEEDS = 1200
FIVE_NODE_SEEDS = 800
CHUNK = 100


@pytest.mark.parametrize("first", range(0, THREE_NODE_SEEDS, CHUNK))
def test_random_faults_three_nodes(first: int) -> None:
    for seed in range(first, first + CHUNK):
        result = run_chaos(seed, 3)
        assert result.healed_after < LIVENESS_SECONDS


@pytest.mark.parametrize("first", range(0, FIVE_NODE_SEEDS, CHUNK))
def test_random_faults_five_nodes(first: int) -> None:
    for seed in range(first, first + CHUNK):
        result = run_chaos(seed, 5)
        assert result.healed_after < LIVENESS_SECONDS


def test_random_runs_exercise_elections_and_commits() -> None:
    results = [run_chaos(seed, 3) for seed in range(50)]
    assert sum(r.committed for r in results) > 500
    assert sum(r.leaders for r in results) > 60


@pytest.mark.parametrize("seed", range(20))
def test_new_leader_well_under_a_second_after_the_leader_dies(seed: int) -> None:
    """Demo defaults: heartbeat 0.1 s x leak 3, short randomized vote intervals."""
    sim = Simulation(["n0", "n1", "n2"], seed=seed, config=RaftConfig())
    old = stable_leader(sim)
    sim.run_until(sim.now + 0.5)
    sim.crash(old.node_id)
    killed_at = sim.now

    def new_leader() -> bool:
        leader = sim.leader()
        return leader is not None and leader.node_id != old.node_id

    assert run_until_true(sim, new_leader, 1.0)
    assert sim.now - killed_at < 0.9
