"""Controller-mode replication: what copying to three replicas costs, and failover gaps.

* Throughput: 1 KiB messages, native client, batched (``BATCH`` per request,
  ``SENDERS`` concurrent requests), against a 3-replica group with
  ``allAckInSyncStateSet=true`` and, running beside it, one unreplicated broker, in
  ``HA_BENCH_ROUNDS`` alternating rounds (default 5, 2 with ``--quick``;
  ``bench.alternating``: medians and each round's ratio; the SyncStateSet read at the
  start and end of every replicated phase, the row FAILED if a replica fell out). The
  unreplicated median is the row's ``limit``. CPU microseconds per acknowledged message
  are printed for every broker process and for the client, so the cost of replication
  on a 2-core machine shows where it goes; so are the CPUs those processes and the
  whole machine kept busy (other work on the machine shows there). From the CPU per
  message measured in the run: the rate the replicated group would reach with every
  core busy, and the replicated/unreplicated ratio with both runs CPU-bound.
* Failover: the official client, connected to an ``mqproxy`` in front of the group,
  sends one message at a time; the master is SIGKILLed ``HA_BENCH_KILLS`` times
  (default 20, 2 with ``--quick``; restarted each time) and SIGSTOPped
  ``HA_BENCH_HANGS`` times (default 5, 1 with ``--quick``; woken after the new master
  is elected). The figure is the longest gap between two acknowledged sends around
  each fault: median and max. The hangs are repeated with the client connected to the
  three replicas directly, beside it. The group runs with the shipped failure
  detection (``ProcessGroup(detection="shipped")``: the brokers' and controllers'
  defaults, as the operator renders them), so the SIGSTOP figure is what a user gets;
  the controllers' own record of each election (last heartbeat -> new master applied)
  is printed beside it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bench import Row, cpu_seconds
from bench.alternating import PLAIN, Rounds, order, sync_state_set_problem
from bench.broker_bench import BrokerProcess
from mqcluster.client import AdminClient, Message, Producer
from mqcluster.client.controller import ReplicaInfo
from mqcluster_testing.broker.procs import start_proxy
from mqcluster_testing.ha.cluster import GROUP, ProcessGroup

NAME = "ha"
MSG_SIZE = 1024
BATCH = 32
SENDERS = 64  # enough in flight that replication latency does not cap the rate
PHASE_SECONDS = 4.0
TOPIC = "BenchHA"
QUICK = os.environ.get("BENCH_QUICK") == "1"
KILLS = int(os.environ.get("HA_BENCH_KILLS", "2" if QUICK else "20"))
HANGS = int(os.environ.get("HA_BENCH_HANGS", "1" if QUICK else "5"))
ROUNDS = int(os.environ.get("HA_BENCH_ROUNDS", "2" if QUICK else "5"))
HANG_SECONDS = 8.0
REQUEST_TIMEOUT_S = 2


@dataclass(frozen=True)
class Phase:
    """One batched phase, measured."""

    rate: float
    per_msg: list[float]
    """CPU seconds per acknowledged message, for each process asked about."""
    p99_ms: float
    cores: float
    """CPUs those processes kept busy on average."""
    machine_cores: float
    """CPUs busy on the whole machine meanwhile (anything else running shows here)."""


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent not idle (Linux /proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


async def measure(addr: str, pids: list[int]) -> Phase:
    """PHASE_SECONDS of batches: rate, CPU per message of each pid, and how busy the
    CPUs were."""
    async with AdminClient(broker_addr=addr) as admin:
        await admin.create_topic(TOPIC, queue_nums=8)
    payload = random.randbytes(MSG_SIZE)
    count = 0
    latencies: list[float] = []
    async with Producer(broker_addr=addr, retries=0) as producer:
        cpu0 = [cpu_seconds([p]) for p in pids]
        busy0 = machine_busy_seconds()
        started = time.perf_counter()
        deadline = started + PHASE_SECONDS

        async def loop() -> None:
            nonlocal count
            while time.perf_counter() < deadline:
                msgs = [Message(TOPIC, payload) for _ in range(BATCH)]
                t0 = time.perf_counter()
                acked = len(await producer.send_batch(msgs))
                count += acked  # after the await: ``count += len(await ...)`` loses updates
                latencies.append(time.perf_counter() - t0)

        await asyncio.gather(*(loop() for _ in range(SENDERS)))
        elapsed = time.perf_counter() - started
        used = [cpu_seconds([p]) - c for p, c in zip(pids, cpu0, strict=True)]
        machine = (machine_busy_seconds() - busy0) / elapsed
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000 if ordered else 0.0
    return Phase(count / elapsed, [u / max(1, count) for u in used], p99,
                 sum(used) / elapsed, machine)


async def batched(addr: str, pids: list[int]) -> tuple[float, list[float], float]:
    """(messages/s, CPU seconds per message of each pid, p99 ack latency in ms) for
    PHASE_SECONDS of batches."""
    phase = await measure(addr, pids)
    return phase.rate, phase.per_msg, phase.p99_ms


def cpu_limit_row(bench: str, who: str, plain_rate: float, per_msg: list[float]) -> Row:
    """The rate at which ``who``'s measured CPU per message (every process, client
    included) would keep all of this machine's cores busy: the most this code can
    reach here, however the work is scheduled."""
    cpus = os.cpu_count() or 1
    limit = cpus / sum(per_msg)
    return Row(bench, f"  {who}: CPU-bound limit on {cpus} CPUs", limit, "msgs/s", "",
               plain_rate, note="all cores busy at the CPU per message measured above")


def ceiling_ratio_row(bench: str, plain: Phase, replicated: Phase) -> Row:
    """The ratio the two rates would have if both runs kept the CPUs busy: the CPU one
    unreplicated message costs (broker and client) over what a replicated one costs
    (three replicas and client), both measured in this run."""
    ratio = sum(plain.per_msg) / sum(replicated.per_msg)
    return Row(bench, "  replicated/unreplicated with the CPUs saturated", ratio, "",
               ">= 0.6", note=f"CPU us/msg {sum(plain.per_msg) * 1e6:.0f} unreplicated / "
                              f"{sum(replicated.per_msg) * 1e6:.0f} replicated, clients "
                              f"included; above 0.6 the target is within this machine's CPUs")


def cores(phase: Phase) -> str:
    cpus = os.cpu_count() or 1
    return (f"CPUs busy: these processes {phase.cores:.2f}, whole machine "
            f"{phase.machine_cores:.2f} of {cpus}")


def micro(per_msg: list[float]) -> str:
    return ", ".join(f"{x * 1e6:.0f}" for x in per_msg)


class AckClock:
    """The official client sending one message at a time; when each ack came. Each body
    starts with its own 8-byte id (``first_id``, ``first_id + 1``...), and the ids
    acknowledged are kept, so a reader can tell which acknowledged message it lacks."""

    def __init__(self, endpoints: str, first_id: int = 0) -> None:
        self.endpoints = endpoints
        self.next_id = first_id
        self.acked_ids: list[int] = []
        self.acks: list[float] = []
        self.failures = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from rocketmq import ClientConfiguration, Credentials
        from rocketmq import Message as GrpcMessage
        from rocketmq import Producer as GrpcProducer

        asyncio.set_event_loop(asyncio.new_event_loop())
        p = GrpcProducer(ClientConfiguration(self.endpoints, Credentials(),
                                             request_timeout=REQUEST_TIMEOUT_S),
                         (TOPIC,))
        p.startup()
        filler = b"x" * (MSG_SIZE - 8)
        try:
            while not self.stop.is_set():
                m = GrpcMessage()
                m.topic = TOPIC
                msg_id = self.next_id
                self.next_id += 1
                m.body = msg_id.to_bytes(8, "big") + filler
                try:
                    p.send(m)
                    self.acked_ids.append(msg_id)
                    self.acks.append(time.monotonic())
                except Exception:
                    self.failures += 1
        finally:
            p.shutdown()

    async def wait_acks(self, n: int, timeout: float = 60.0) -> None:
        async with asyncio.timeout(timeout):
            while len(self.acks) < n:
                await asyncio.sleep(0.02)

    async def wait_acks_after(self, t: float, more: int, timeout: float = 60.0) -> None:
        """Until ``more`` acks have come beyond those that had come by ``t``."""
        await self.wait_acks(len([a for a in self.acks if a <= t]) + more, timeout)

    def gap_since(self, t: float) -> float:
        """``gap_around`` up to the latest ack."""
        return self.gap_around(t, max(self.acks))

    def gap_around(self, t: float, until: float) -> float:
        """The longest gap between consecutive acks from the last one before the fault
        at ``t`` up to ``until`` (when the client was seen acking again)."""
        acks = sorted(self.acks)
        start = max((i for i, a in enumerate(acks) if a <= t), default=0)
        window = [a for a in acks[start:] if a <= until] + [until]
        return max((b - a for a, b in itertools.pairwise(window)), default=0.0)


class FaultTarget(Protocol):
    """A replicated group as processes: who leads, and faults to inject."""

    @property
    def endpoints(self) -> str: ...

    async def wait_master(self, timeout: float = ..., *, not_index: int | None = ...) -> int: ...

    async def wait_ready(self) -> None: ...

    async def kill(self, i: int) -> None: ...

    async def restart(self, i: int) -> None: ...

    def hang(self, i: int) -> None: ...

    def wake(self, i: int) -> None: ...


async def before_fault(g: FaultTarget, rng: random.Random) -> tuple[int, float]:
    """The master, once every replica is in sync and a random 0.2-0.6 s has passed (so
    faults do not line up with the client's sends), and the fault's time."""
    m = await g.wait_master()
    await g.wait_ready()
    await asyncio.sleep(rng.uniform(0.2, 0.6))
    return m, time.monotonic()


async def failover(g: FaultTarget, endpoints: str | None = None, kills: int | None = None,
                   hangs: int | None = None) -> tuple[list[float], list[float], int]:
    """Gaps after ``kills`` SIGKILLs and ``hangs`` SIGSTOPs of the master, for the
    official client connected to ``endpoints`` (default: the replicas themselves)."""
    kill_gaps, hang_gaps, clock = await failover_clocked(g, endpoints, kills, hangs)
    return kill_gaps, hang_gaps, clock.failures


async def failover_clocked(g: FaultTarget, endpoints: str | None = None,
                           kills: int | None = None, hangs: int | None = None,
                           first_id: int = 0) -> tuple[list[float], list[float], AckClock]:
    """The faults of ``failover``; the client's clock too, for what it saw acknowledged
    (message ids from ``first_id``)."""
    clock = AckClock(endpoints or g.endpoints, first_id)
    n_kills = KILLS if kills is None else kills
    n_hangs = HANGS if hangs is None else hangs
    clock.thread.start()
    kill_gaps: list[float] = []
    hang_gaps: list[float] = []
    rng = random.Random(7)
    try:
        await clock.wait_acks(20)
        for _ in range(n_kills):
            m, t = await before_fault(g, rng)
            await g.kill(m)
            await clock.wait_acks_after(t, 3)
            kill_gaps.append(clock.gap_since(t))
            await g.restart(m)
        for _ in range(n_hangs):
            m, t = await before_fault(g, rng)
            g.hang(m)
            await g.wait_master(not_index=m)
            # A client whose connection is to the hung process itself waits for its
            # request timeout; keep the process stopped a while before waking it.
            with contextlib.suppress(TimeoutError):
                await clock.wait_acks_after(t, 3, timeout=HANG_SECONDS)
            g.wake(m)
            await clock.wait_acks_after(t, 3)
            hang_gaps.append(clock.gap_since(t))
    finally:
        clock.stop.set()
        await asyncio.to_thread(clock.thread.join, 30)
    return kill_gaps, hang_gaps, clock


SHIPPED = "shipped failure detection"


def failover_rows(bench: str, who: str, kills: list[float], hangs: list[float],
                  failures: int, kill_target: float, hang_target: float,
                  via: str = "mqproxy") -> list[Row]:
    rows = []
    if kills:
        rows.append(Row(bench, f"failover gap after SIGKILL of the {who} (median)",
                        statistics.median(kills), "s", f"median < {kill_target} s",
                        note=f"max {max(kills):.2f} s over {len(kills)}; official client "
                             f"through {via}; failed sends {failures}; {SHIPPED}"))
    if hangs:
        rows.append(Row(bench, f"failover gap after SIGSTOP of the {who} (median)",
                        statistics.median(hangs), "s", f"median < {hang_target} s",
                        note=f"max {max(hangs):.2f} s over {len(hangs)}; official client "
                             f"through {via}; {SHIPPED}"))
    return rows


async def hang_elections(g: ProcessGroup, since: list[dict[str, object]]) -> list[float]:
    """Seconds from the last heartbeat of a hung master to its successor applied, as the
    controllers recorded the heartbeat-timeout elections not in ``since``."""
    return [(int(e["detection_ms"] or 0) + int(e["consensus_ms"])) / 1000
            for e in await g.elections()
            if e not in since and e["trigger"] == "heartbeat_timeout"]


def direct_hang_row(bench: str, who: str, hangs: list[float]) -> list[Row]:
    """The same client connected straight to the replicas: when its connection is to
    the hung process itself (pick_first, no keepalive) it waits until the process is
    woken; that is what the proxy is for."""
    if not hangs:
        return []
    return [Row(bench, "  same, client connected to the replicas directly (median)",
                statistics.median(hangs), "s", "",
                note=f"max {max(hangs):.2f} s over {len(hangs)}; a client whose own "
                     f"connection is to the hung process waits until it is woken, here "
                     f"after {HANG_SECONDS:.0f} s")]


def median_phase(phases: list[Phase]) -> Phase:
    """Per field, the median over phases (CPU per message process by process)."""
    return Phase(statistics.median(p.rate for p in phases),
                 [statistics.median(x) for x in zip(*(p.per_msg for p in phases),
                                                    strict=True)],
                 statistics.median(p.p99_ms for p in phases),
                 statistics.median(p.cores for p in phases),
                 statistics.median(p.machine_cores for p in phases))


async def replica_info(g: ProcessGroup) -> ReplicaInfo | None:
    try:
        return await asyncio.wait_for(g.replica_info(), 5)
    except Exception:
        return None


async def replicated_phase(g: ProcessGroup) -> tuple[Phase, str | None]:
    """One phase against the master, the SyncStateSet read at its start and end; why a
    replica was not in it throughout, if one was not."""
    with contextlib.suppress(TimeoutError):
        await g.wait_sync_state_set(g.size, 30)
    start = await replica_info(g)
    m = await g.wait_master()
    pids = [b.proc.pid for b in g.brokers if b.proc is not None]
    order_ = [m] + [i for i in range(g.size) if i != m]
    phase = await measure(g.brokers[m].addr, [pids[i] for i in order_] + [os.getpid()])
    return phase, sync_state_set_problem(g.size, start, await replica_info(g))


async def alternating(single: BrokerProcess, g: ProcessGroup
                      ) -> tuple[Rounds, list[Phase], list[Phase]]:
    assert single.proc is not None
    rounds = Rounds()
    plain: list[Phase] = []
    repl: list[Phase] = []
    for k in range(ROUNDS):
        for side in order(k):
            if side == PLAIN:
                plain.append(await measure(single.addr, [single.proc.pid, os.getpid()]))
                rounds.plain.append(plain[-1].rate)
            else:
                phase, problem = await replicated_phase(g)
                repl.append(phase)
                rounds.replicated.append(phase.rate)
                rounds.add_problem(k, problem)
    return rounds, plain, repl


async def _run(root: Path) -> list[Row]:
    rows: list[Row] = []
    ip = "127.0.0.61"
    (root / "single").mkdir()
    single = BrokerProcess(root / "single", ip, brokerName="bench-single")
    g = ProcessGroup(root / "group", detection="shipped")
    try:
        await single.start()
        await g.start()
        await g.wait_sync_state_set(3)
        rounds, plain_phases, repl_phases = await alternating(single, g)
        await single.stop()
        plain, repl = median_phase(plain_phases), median_phase(repl_phases)
        rows += [
            Row(NAME, "unreplicated broker, batched 1 KiB", plain.rate, "msgs/s",
                note=f"median of {ROUNDS} phases alternating with the group's; CPU us/msg: "
                     f"broker, client = {micro(plain.per_msg)}; {cores(plain)}"),
            Row(NAME, rounds.metric("3 replicas, allAckInSyncStateSet, batched 1 KiB"),
                repl.rate, "msgs/s", ">= 0.6 x unreplicated", plain.rate,
                note=f"{rounds.note()}; CPU us/msg: master, slave, slave, client = "
                     f"{micro(repl.per_msg)}; whole group "
                     f"{sum(repl.per_msg[:3]) * 1e6:.0f}; {cores(repl)}"),
            cpu_limit_row(NAME, "3 replicas", plain.rate, repl.per_msg),
            ceiling_ratio_row(NAME, plain, repl),
        ]
        if not KILLS and not HANGS:
            return rows
        proxy = await start_proxy(root, GROUP, controllerAddr=g.controllers.controller_addr)
        before = await g.elections()
        try:
            kills, hangs, failures = await failover(g, proxy.addr)
        finally:
            await proxy.kill()
        elections = await hang_elections(g, before)
        _, direct, _ = await failover(g, kills=0)
        rows += failover_rows(NAME, "master", kills, hangs, failures, 0.5, 3.0)
        if elections:
            rows.append(Row(NAME, "  hung master: last heartbeat -> new master applied (median)",
                            statistics.median(elections), "s", "< 3 s",
                            note=f"max {max(elections):.2f} s over {len(elections)}; the "
                                 f"controllers' record; {SHIPPED}"))
        rows += direct_hang_row(NAME, "master", direct)
    finally:
        await single.stop()
        await g.close()
    return rows


def run() -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="bench-ha-") as tmp:
        return asyncio.run(_run(Path(tmp)))
