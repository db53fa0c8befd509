"""Faults count only when they took effect; overlapping pairs; the producer's history
of attempts. No namespaces: fake clusters and a fake producer."""

from __future__ import annotations

import asyncio
import inspect
import io
import json
import random
from typing import Any, cast

import pytest
from rocketmq import Message, Producer

from chaos import table
from chaos.check import Verdict, loss_windows
from chaos.cluster import ChaosCluster
from chaos.faults import (
    OVERLAPS,
    POWER_FAULTS,
    Outcome,
    faults_for,
    kill_master,
    overlap,
    power_loss,
)
from chaos.runner import ScenarioResult
from chaos.workload import SEND_ATTEMPT, record_attempts
from mqcluster_audit.history import HistoryWriter


class Proc:
    def __init__(self) -> None:
        self.killed = self.started = 0
        self.alive = True

    async def kill(self) -> None:
        self.killed += 1

    async def start(self) -> None:
        self.started += 1


class NoSuccessor:
    """A group whose master is b1 and stays b1: no other replica is ever elected."""

    def __init__(self) -> None:
        self.brokers = [Proc(), Proc(), Proc()]

    async def wait_master(self, timeout: float = 30.0, *, not_index: int | None = None) -> int:
        if not_index == 1:
            raise TimeoutError
        return 1


async def test_a_master_kill_without_a_new_master_did_not_take_effect() -> None:
    c = NoSuccessor()
    out = await kill_master(cast(ChaosCluster, c), random.Random(1))
    assert (out.what, out.took_effect) == ("SIGKILL b1 (master), NO new master", False)
    assert (c.brokers[1].killed, c.brokers[1].started) == (1, 1)


def test_a_fault_without_effect_is_counted_apart_and_shown() -> None:
    r = ScenarioResult("controller", 1, verdict=Verdict(acknowledged=5,
                                                        replicas_identical=True))
    r.record("kill-master", Outcome("SIGKILL b0 (master), new master elected"))
    line = r.record("kill-master", Outcome("SIGKILL b1 (master), NO new master", False))
    assert line.endswith("[no effect: not counted]")
    assert (r.faults["kill-master"], r.no_effect["kill-master"]) == (1, 1)
    out = table.render([r]).splitlines()
    assert out[0].split()[:5] == ["scenario", "seed", "faults", "no", "effect"]
    assert out[2].split()[:5] == ["controller", "1", "1", "1", "5"]
    assert "controller: faults without effect (not counted) kill-master x1" in out


async def test_overlapping_faults_run_at_once_and_take_effect_together() -> None:
    order: list[str] = []
    first_holding = asyncio.Event()
    second_done = asyncio.Event()

    async def holds(c: ChaosCluster, rng: random.Random) -> Outcome:
        order.append("first in")
        first_holding.set()
        await second_done.wait()  # still holding when the second one runs
        order.append("first out")
        return Outcome("cut")

    async def kills(c: ChaosCluster, rng: random.Random) -> Outcome:
        await first_holding.wait()
        order.append("second")
        second_done.set()
        return Outcome("kill", took_effect=False)

    both = overlap(holds, kills, 0)
    out = await both(cast(ChaosCluster, None), random.Random(1))
    assert order == ["first in", "second", "first out"]
    assert (out.what, out.took_effect) == ("cut; during it: kill", False)


async def test_a_plain_string_from_an_injector_took_effect() -> None:
    async def said(c: ChaosCluster, rng: random.Random) -> str:
        return "fuzz: 10 payloads"

    out = await overlap(said, said, 0)(cast(ChaosCluster, None), random.Random(1))
    assert out.took_effect
    r = ScenarioResult("dledger", 1)
    assert r.record("fuzz", "fuzz: 10 payloads") == "fuzz: 10 payloads"
    assert r.faults["fuzz"] == 1


def test_overlapping_pairs_are_chosen_with_the_option_or_by_name() -> None:
    pairs = {f.name for f in OVERLAPS}
    assert {"kill-master-during-part-master-slaves", "kill-controller-during-election",
            "power-loss-during-part-master-slaves"} == pairs
    assert not pairs & {f.name for f in faults_for("controller")}
    assert pairs <= {f.name for f in faults_for("controller", overlaps=True)}
    assert {f.name for f in faults_for("dledger", overlaps=True)} & pairs == {
        "kill-master-during-part-master-slaves", "power-loss-during-part-master-slaves"}
    assert [f.name for f in faults_for("dledger", ["kill-master-during-part-master-slaves"])] \
        == ["kill-master-during-part-master-slaves"]
    with pytest.raises(ValueError, match="unknown fault"):
        faults_for("dledger", ["kill-everything"])


class RetryingProducer:
    """Makes its attempts as the official client does: the retry calls the attempt
    method again through the instance."""

    def __init__(self, failures: int) -> None:
        self.failures = failures

    def _Producer__send(self, message: Message, topic_queue: object, attempt: int = 1) -> str:
        if attempt <= self.failures:
            return cast(str, getattr(self, SEND_ATTEMPT)(message, topic_queue, attempt + 1))
        return f"acked on attempt {attempt}"


def test_every_attempt_of_the_client_writes_a_send_event() -> None:
    out = io.StringIO()
    current: dict[str, Any] = {}
    p = RetryingProducer(failures=2)
    record_attempts(cast(Producer, p), HistoryWriter(out, "p0"), current)
    m = Message()
    m.message_id = "id-1"
    current.update({"topic": "T", "seq": 3}, key="p0-g0-3")
    assert getattr(p, SEND_ATTEMPT)(m, None) == "acked on attempt 3"
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(e["event"], e["key"], e["attempt"], e["msg_id"], e["seq"]) for e in events] == [
        ("send", "p0-g0-3", n, "id-1", 3) for n in (1, 2, 3)]


def test_the_official_client_retries_through_the_wrapped_method() -> None:
    """What ``record_attempts`` relies on in the installed client."""
    assert hasattr(Producer, SEND_ATTEMPT)
    source = inspect.getsource(Producer)
    assert "return self.__send(message, topic_queue, attempt)" in source
    with pytest.raises(RuntimeError, match="no _Producer__send"):
        record_attempts(cast(Producer, object()), HistoryWriter(io.StringIO(), "p0"), {})


class PoweredGroup:
    """A group of 3 whose master is b2; records the order of kills, power cycles and
    starts."""

    def __init__(self) -> None:
        self.steps: list[str] = []
        self.power_losses: list[int] = []
        self.brokers = [self.Broker(self, i) for i in range(3)]

    class Broker:
        def __init__(self, group: PoweredGroup, i: int) -> None:
            self.group, self.i = group, i

        async def kill(self) -> None:
            self.group.steps.append(f"kill b{self.i}")

        async def start(self) -> None:
            self.group.steps.append(f"start b{self.i}")

    async def wait_master(self, timeout: float = 30.0, *, not_index: int | None = None) -> int:
        return 2

    async def power_cycle(self, i: int) -> dict[str, Any]:
        self.steps.append(f"cycle b{i}")
        return {"unsynced_bytes": 4096, "undone": ["create x"]}


@pytest.mark.parametrize("seed", range(6))
async def test_a_power_loss_hits_the_master_and_a_majority_or_all_killed_before_any_drop(
        seed: int) -> None:
    g = PoweredGroup()
    out = await power_loss(cast(ChaosCluster, g), random.Random(seed))
    hit = sorted({s.split()[1] for s in g.steps})
    assert "b2" in hit and len(hit) in (2, 3)
    kinds = [s.split()[0] for s in g.steps]
    assert kinds == ["kill"] * len(hit) + ["cycle"] * len(hit) + ["start"] * len(hit)
    assert out.took_effect and len(g.power_losses) == 1
    assert out.what.startswith(f"power loss on {', '.join(hit)} (master b2): "
                               f"{4 * len(hit)} KiB unsynced dropped")
    assert {"power-loss", "power-loss-during-part-master-slaves",
            "power-loss-all"} == POWER_FAULTS
    assert "power-loss-all" not in {f.name for f in faults_for("controller", overlaps=True)}
    assert [f.name for f in faults_for("controller", ["power-loss-all"])] == [
        "power-loss-all"]


def test_each_lost_message_is_measured_from_its_ack_to_the_next_power_loss() -> None:
    acks = [{"key": "a", "time_ms": 1000}, {"key": "b", "time_ms": 1900},
            {"key": "c", "time_ms": 2500}]
    assert loss_windows(["a", "b", "c"], acks, [2000, 3000]) == [1000, 100, 500]
    assert loss_windows(["c"], acks, [2000]) == [], "no power loss after it: not measured"
