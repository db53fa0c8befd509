"""One scenario: a cluster in namespaces, a producer and a consumer in the client host,
a seeded schedule of faults until the time is up, then the offline verdict."""

from __future__ import annotations

import asyncio
import collections
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from chaos.check import Verdict, check
from chaos.cluster import CONSUMER_GROUP, TOPIC, ChaosCluster
from chaos.controller_mode import AsyncFlushControllerCluster, ControllerCluster
from chaos.dledger_mode import DLedgerCluster
from chaos.faults import Fault, faults_for, outcome
from chaos.lazymount import fuse_unavailable
from chaos.netns import Network
from chaos.process import HostProcess

CLUSTERS: dict[str, type[ChaosCluster]] = {"controller": ControllerCluster,
                                           "dledger": DLedgerCluster,
                                           "controller-async": AsyncFlushControllerCluster}
RECOVERY_TIMEOUT = 90.0


@dataclass
class ScenarioResult:
    scenario: str
    seed: int
    faults: collections.Counter[str] = field(default_factory=collections.Counter)
    """Faults that took effect, by kind."""
    no_effect: collections.Counter[str] = field(default_factory=collections.Counter)
    """Faults injected that did not cause what they are for (no new master...)."""
    log: list[str] = field(default_factory=list)
    verdict: Verdict | None = None
    error: str | None = None
    workdir: Path | None = None
    master: int | None = None
    """The final master: its store is the reference copy."""

    @property
    def ok(self) -> bool:
        return self.error is None and self.verdict is not None and self.verdict.ok

    def record(self, fault: str, said: str) -> str:
        """Count a fault as injected if it took effect, apart if not; the log line."""
        done = outcome(said)
        (self.faults if done.took_effect else self.no_effect)[fault] += 1
        what = done.what + ("" if done.took_effect else " [no effect: not counted]")
        self.log.append(what)
        return what


class HistoryFollower:
    """Counts the events of one kind in a growing JSON-lines file."""

    def __init__(self, path: Path, event: str) -> None:
        self.path = path
        self.event = event
        self.keys: set[str] = set()
        self._pos = 0
        self._partial = b""

    def poll(self) -> int:
        if self.path.exists():
            with self.path.open("rb") as f:
                f.seek(self._pos)
                data = self._partial + f.read()
                self._pos = f.tell()
            *lines, self._partial = data.split(b"\n")
            for line in lines:
                if f'"event":"{self.event}"'.encode() in line:
                    self.keys.add(json.loads(line)["key"])
        return len(self.keys)

    async def wait(self, count: int, timeout: float) -> None:
        async with asyncio.timeout(timeout):
            while self.poll() < count:
                await asyncio.sleep(0.05)

    async def wait_keys(self, keys: set[str], timeout: float) -> None:
        async with asyncio.timeout(timeout):
            while not keys <= self.keys:
                self.poll()
                await asyncio.sleep(0.1)


def schedule(faults: list[Fault], rng: random.Random) -> list[Fault]:
    """Rounds of every fault kind in a random order, so a short run still has each."""
    return rng.sample(faults, len(faults))


def say(message: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {message}", flush=True)


async def run_scenario(mode: str, duration: float, seed: int, workdir: Path,
                       fault_names: list[str] | None = None,
                       faults: list[Fault] | None = None,
                       overlaps: bool = False) -> ScenarioResult:
    """``faults`` replaces the mode's fault kinds (``fault_names`` picks among them;
    ``overlaps`` adds the overlapping pairs)."""
    rng = random.Random(seed)
    result = ScenarioResult(mode, seed, workdir=workdir)
    kind = CLUSTERS[mode]
    faults = faults if faults is not None else faults_for(kind.mode, fault_names, overlaps)
    no_fuse = fuse_unavailable()
    if no_fuse is not None and any(f.power for f in faults):
        say(f"{mode}: no power-loss faults: {no_fuse}")
        faults = [f for f in faults if not f.power]
    workdir.mkdir(parents=True, exist_ok=True)
    histories = [workdir / "producer.jsonl", workdir / "consumer.jsonl"]
    net = Network()
    cluster = kind(net, workdir, lazy=any(f.power for f in faults))
    workers: list[HostProcess] = []
    step = "creating the namespaces"
    try:
        net.create()
        say(f"{mode}: starting the cluster in namespaces (10.{net.subnet}.0.0/16), "
            f"seed {seed}")
        step = "starting the cluster"
        await cluster.start()
        assert cluster.client is not None
        for role, out in zip(("produce", "consume"), histories, strict=True):
            workers.append(HostProcess.python(
                f"{role}r", cluster.client,
                ["-m", "chaos.workload", role, "--endpoints", cluster.endpoints, "--topic",
                 TOPIC, "--group", CONSUMER_GROUP, "--client", role[0] + "0", "--out",
                 str(out)], workdir / f"{role}r.log", "started"))
        acks = HistoryFollower(histories[0], "ack")
        receipts = HistoryFollower(histories[1], "receive")
        step = "starting the workload"
        await workers[0].start()
        await acks.wait(20, 60)
        await workers[1].start()
        deadline = time.monotonic() + duration
        plan: list[Fault] = []
        rounds = 0
        while True:
            if not plan:  # a round is never cut short: every kind gets its turn
                if rounds and time.monotonic() >= deadline:
                    break
                plan = schedule(faults, rng)
                rounds += 1
            fault = plan.pop(0)
            step = f"injecting {fault.name}"
            said = await fault.inject(cluster, rng)
            say(f"{mode}: {result.record(fault.name, said)}")
            step = f"recovering from {said}"
            await cluster.wait_healthy(RECOVERY_TIMEOUT)
            await acks.wait(acks.poll() + 5, RECOVERY_TIMEOUT)
        step = "finishing the workload"
        await acks.wait(acks.poll() + 20, RECOVERY_TIMEOUT)
        await workers[0].terminate()
        acked = acks.poll()
        say(f"{mode}: {acked} acknowledged; waiting for the consumer")
        try:
            await receipts.wait_keys(acks.keys, 60)
        except TimeoutError:
            say(f"{mode}: the consumer did not receive every acknowledged message in 60 s")
        await workers[1].terminate()
        step = "stopping the brokers"
        await cluster.wait_healthy(RECOVERY_TIMEOUT)
        result.master = await cluster.stop_brokers()
        result.verdict = check(cluster, result.master, histories)
    except Exception as exc:
        result.error = f"{step}: {type(exc).__name__} {exc}".rstrip()
        say(f"{mode}: FAILED: {result.error}\n{cluster.logs()}")
    finally:
        for w in workers:
            await w.kill()
        await cluster.close()
        net.close()
    return result

