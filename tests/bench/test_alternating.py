"""Alternating rounds and the replica checks around every replicated phase."""

from __future__ import annotations

from typing import Any

from bench.alternating import (
    PLAIN,
    REPLICATED,
    Rounds,
    dledger_problem,
    order,
    sync_state_set_problem,
)
from mqcluster.client.controller import ReplicaInfo


def test_the_side_going_first_swaps_every_round() -> None:
    assert [order(k) for k in range(4)] == [(PLAIN, REPLICATED), (REPLICATED, PLAIN)] * 2


def test_rounds_give_each_rounds_ratio_and_the_median() -> None:
    r = Rounds(plain=[10_000, 8_000, 9_000], replicated=[6_000, 6_400, 4_500])
    assert not r.failed
    assert r.metric("3 replicas") == "3 replicas"
    assert r.note() == ("median of 3 alternating rounds; ratio per round 0.60, 0.80, 0.50 "
                        "(median 0.60); replicated per round 6,000, 6,400, 4,500; "
                        "unreplicated 10,000, 8,000, 9,000")


def test_a_phase_a_replica_fell_out_of_fails_the_row_saying_why() -> None:
    r = Rounds(plain=[10_000, 9_000], replicated=[6_000, 9_000])
    r.add_problem(0, None)
    r.add_problem(1, "SyncStateSet [1] at the end, 3 replicas expected")
    assert r.failed
    assert r.metric("3 replicas") == "3 replicas: FAILED"
    assert r.note().startswith("FAILED: round 2: SyncStateSet [1] at the end")
    assert Rounds(plain=[1.0]).failed, "no replicated phase measured"


def info(members: set[int], epoch: int = 4, master: str = "m:1") -> ReplicaInfo:
    return ReplicaInfo(1, master, 2, members, epoch)


def test_sync_state_set_whole_and_unchanged_through_the_phase() -> None:
    assert sync_state_set_problem(3, info({1, 2, 3}), info({1, 2, 3})) is None
    assert sync_state_set_problem(3, info({1, 2, 3}), info({1})) == \
        "SyncStateSet [1] at the end, 3 replicas expected"
    assert sync_state_set_problem(3, info({1, 2}), info({1, 2, 3})) == \
        "SyncStateSet [1, 2] at the start, 3 replicas expected"
    assert "fell out in between" in str(
        sync_state_set_problem(3, info({1, 2, 3}), info({1, 2, 3}, epoch=6)))
    moved = sync_state_set_problem(3, info({1, 2, 3}), info({1, 2, 3}, master="n:1"))
    assert moved == "master m:1 at the start, n:1 at the end"


def test_a_sync_state_set_that_cannot_be_read_fails() -> None:
    assert sync_state_set_problem(3, None, info({1, 2, 3})) == \
        "the SyncStateSet could not be read at the start"
    assert sync_state_set_problem(3, info({1, 2, 3}), None) == \
        "the SyncStateSet could not be read at the end"


def st(role: str, last: int, commit: int | None = None, applied: int | None = None,
       term: int = 2) -> dict[str, Any]:
    return {"role": role, "term": term, "lastIndex": last,
            "commitIndex": last if commit is None else commit,
            "appliedIndex": last if applied is None else applied}


START = [st("LEADER", 100), st("FOLLOWER", 100), st("FOLLOWER", 100)]


def test_dledger_replicas_that_kept_up_pass() -> None:
    end = [st("LEADER", 1000), st("FOLLOWER", 1000, 990), st("FOLLOWER", 700, 650)]
    assert dledger_problem(START, end) is None


def test_a_dledger_follower_that_fell_out_fails() -> None:
    end = [st("LEADER", 1000), st("FOLLOWER", 1000), st("FOLLOWER", 120)]
    assert dledger_problem(START, end) == (
        "b2 stored 20 of the 900 entries the leader committed during the phase: it fell out")


def test_dledger_phase_checks_at_the_start() -> None:
    behind = [st("LEADER", 100), st("FOLLOWER", 100), st("FOLLOWER", 90)]
    assert dledger_problem(behind, START) == \
        "replicas not caught up at the start: applied [90, 100]"
    assert dledger_problem([st("FOLLOWER", 1)] * 3, START) == "0 leaders at the start"


def test_a_new_term_or_a_silent_replica_fails() -> None:
    end = [st("LEADER", 1000, term=3), st("FOLLOWER", 1000), st("FOLLOWER", 1000)]
    assert dledger_problem(START, end) == "b0 led at the start, not in the same term at the end"
    assert dledger_problem(START, [st("LEADER", 1000), None, st("FOLLOWER", 1000)]) == \
        "b1 did not answer DLEDGER_STATUS at the end"
    assert dledger_problem(START, START) == "the leader committed nothing during the phase"
    assert dledger_problem(START, [{"role": "LEADER"}, *START[1:]]).startswith(
        "DLedger status without an integer")
