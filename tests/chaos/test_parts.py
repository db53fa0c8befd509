"""The runner's pieces that need no namespaces: following a history file while it is
written, the fault rounds, the summary table."""

from __future__ import annotations

import collections
import random
from pathlib import Path

from chaos import table
from chaos.check import Verdict
from chaos.faults import faults_for
from chaos.runner import HistoryFollower, ScenarioResult, schedule
from chaos.workload import parse_key


def test_follower_counts_whole_lines_only(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    follower = HistoryFollower(path, "ack")
    assert follower.poll() == 0  # not written yet
    path.write_text('{"event":"ack","key":"a"}\n{"event":"send","key":"b"}\n{"event":"ac')
    assert follower.poll() == 1
    with path.open("a") as f:
        f.write('k","key":"b"}\n{"event":"ack","key":"a"}\n')
    assert follower.poll() == 2
    assert follower.keys == {"a", "b"}


def test_every_round_has_every_fault_once() -> None:
    faults = faults_for("controller")
    rng = random.Random(3)
    rounds = [schedule(faults, rng) for _ in range(3)]
    assert all(sorted(f.name for f in r) == sorted(f.name for f in faults) for r in rounds)
    assert {f.name for f in faults_for("dledger")}.isdisjoint(
        {"kill-controller", "part-master-controllers"})
    again = random.Random(3)
    assert rounds == [schedule(faults, again) for _ in range(3)], "the seed replays it"


def test_keys_carry_group_and_seq() -> None:
    assert parse_key("p0-g3-17") == ("p0-g3", 17)
    assert parse_key("junk") is None


def test_table_row_per_scenario() -> None:
    ok = ScenarioResult("controller", 5, collections.Counter({"kill-master": 2}),
                        verdict=Verdict(acknowledged=10, retried=["k"],
                                        replicas_identical=True, max_unavailable_ms=2500))
    bad = ScenarioResult("dledger", 6, verdict=Verdict(acknowledged=3, lost=["k1"]))
    out = table.render([ok, bad]).splitlines()
    assert out[0].split() == ["scenario", "seed", "faults", "no", "effect", "acked", "lost",
                              "duplicated", "retried", "reordered", "replicas", "max",
                              "unavail", "verdict"]
    assert out[2].split() == ["controller", "5", "2", "0", "10", "0", "0", "1", "0",
                              "identical", "2.5", "s", "ok"]
    assert out[3].split()[-1] == "FAILED"
    assert "dledger: lost: k1" in out


def test_an_acknowledged_message_never_delivered_fails_the_verdict() -> None:
    stalled = Verdict(acknowledged=3, unconsumed=["p0-g1-590"], replicas_identical=True)
    assert not stalled.ok
    assert Verdict(acknowledged=3, replicas_identical=True).ok
