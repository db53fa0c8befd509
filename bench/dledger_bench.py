"""DLedger mode: a Raft group of 3 brokers as the commitlog, beside controller mode and an
unreplicated broker in the same run.

1 KiB messages, native client batched (``ha_bench.BATCH`` per request, ``SENDERS``
requests in flight): messages/s, p99 ack latency, and CPU microseconds per
acknowledged message for every broker process and the client. The unreplicated
broker's rate is the ``limit``: it and the DLedger group run side by side and are
measured in ``DLEDGER_BENCH_ROUNDS`` alternating rounds (default 3, 2 with ``--quick``;
``bench.alternating``: medians and each round's ratio, the side going first swapping),
since the load other work puts on shared cores changes from one phase to the next.
Every replica's DLedger indexes are read at the start and end of each DLedger phase;
the row FAILED, saying why, when a replica fell out of one.
Failover: the official client through an ``mqproxy`` (following the name server), one
message at a time, the leader SIGKILLed ``DLEDGER_BENCH_KILLS`` times and SIGSTOPped
``DLEDGER_BENCH_HANGS`` times (default 20 each, 2 with ``--quick``): the longest gap
between acknowledged sends around each fault, median and max.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import statistics
import tempfile
from pathlib import Path

import bench.ha_bench as ha
from bench import Row
from bench.alternating import PLAIN, Rounds, dledger_problem, order
from bench.broker_bench import BrokerProcess
from mqcluster.client.errors import BrokerError
from mqcluster_testing.broker.procs import start_proxy
from mqcluster_testing.ha.cluster import ProcessGroup
from mqcluster_testing.ha.dledger_cluster import DLedgerProcessGroup

log = logging.getLogger(__name__)

NAME = "dledger"
QUICK = os.environ.get("BENCH_QUICK") == "1"
ROUNDS = int(os.environ.get("DLEDGER_BENCH_ROUNDS", "2" if QUICK else "3"))
FAULTS_DEFAULT = "2" if QUICK else "20"


def cpu_note(names: list[str], per_msg: list[float]) -> str:
    parts = ", ".join(f"{n} {x * 1e6:.0f}" for n, x in zip(names, per_msg, strict=True))
    return f"CPU us/msg: {parts}; group {sum(per_msg[:-1]) * 1e6:.0f}"


def cpu_bound_limit(per_msg: list[float]) -> float:
    """Messages/s with every core busy at the measured CPU per message, and no process
    past one core (a Python process runs on one event loop, under one GIL)."""
    cpus = os.cpu_count() or 1
    return min(cpus / sum(per_msg), 1 / max(per_msg))


def cpu_bound_ratio_row(group: list[float], plain: list[float]) -> Row:
    """The two CPU-bound limits side by side: what the group reaches beside the
    unreplicated broker on a machine busy with nothing else, from the CPU per message
    both measured (every process, the client included). Unlike the rates, it does not
    move with what else the shared cores run during each phase."""
    return Row(NAME, "  same, both CPU-bound (DLedger / unreplicated limit)",
               cpu_bound_limit(group), "msgs/s", "", cpu_bound_limit(plain),
               note=f"{sum(group) * 1e6:.0f} vs {sum(plain) * 1e6:.0f} CPU us per message, "
                    f"busiest process {max(group) * 1e6:.0f} vs {max(plain) * 1e6:.0f}")


def _median_run(runs: list[tuple[float, list[float], float]]) -> tuple[float, list[float], float]:
    """Median rate, per-process median CPU per message, median p99 of several phases."""
    rates, cpus, p99s = zip(*runs, strict=True)
    per_msg = [statistics.median(x) for x in zip(*cpus, strict=True)]
    return statistics.median(rates), per_msg, statistics.median(p99s)


def _written(f: Path) -> int:
    """Bytes a file holds on disk (segments are created at their full size, sparse)."""
    return f.stat().st_blocks * 512


def copies_on_disk(root: Path) -> float:
    """Bytes written in every file under ``root`` over those of one replica's commitlog:
    how many times each message was written (commitlogs, Raft logs, consume queues)."""
    files = [f for f in root.rglob("*") if f.is_file()]
    total = sum(_written(f) for f in files)
    commitlogs = [_written(f) for f in files if f.parent.name == "commitlog"]
    replicas = max(1, sum(1 for d in root.rglob("commitlog") if d.is_dir()))
    one = sum(commitlogs) / replicas
    return total / one if one else 0.0


def copies_row(group: float, plain: float) -> Row:
    return Row(NAME, "  bytes written per message, in commitlog copies", group, "copies", "",
               plain, note=f"the DLedger group writes each message {group:.1f} times (3 "
                           f"commitlogs, the Raft logs' references, consume queues), the "
                           f"unreplicated broker {plain:.1f} times")


async def built_note(g: DLedgerProcessGroup) -> str:
    """What the leaders proposed: producer batches (gathered into entries) and entries
    of single messages."""
    counts = {"proposedBuilt": 0, "proposedOther": 0}
    for i in range(len(g.brokers)):
        st = await g.status(i) or {}
        for k in counts:
            counts[k] += int(st.get(k, 0))  # type: ignore[call-overload]
    return (f"producer batches proposed {counts['proposedBuilt']}, entries of single "
            f"messages {counts['proposedOther']}")


async def statuses(g: DLedgerProcessGroup) -> list[dict[str, object] | None]:
    out: list[dict[str, object] | None] = []
    for i in range(len(g.brokers)):
        try:
            out.append(await asyncio.wait_for(g.status(i), 5))
        except Exception:
            out.append(None)
    return out


async def _group_phase(g: DLedgerProcessGroup
                       ) -> tuple[tuple[float, list[float], float], str | None]:
    """One phase against the leader, every replica's indexes read at its start and
    end; why a replica was not in it throughout, if one was not."""
    with contextlib.suppress(TimeoutError):
        await g.wait_caught_up(30)
    start = await statuses(g)
    leader = await g.wait_leader()
    pids = [b.proc.pid for b in g.brokers if b.proc is not None]
    ranks = [leader] + [i for i in range(3) if i != leader]
    run = await ha.batched(g.brokers[leader].addr, [pids[i] for i in ranks] + [os.getpid()])
    return run, dledger_problem(start, await statuses(g))


async def _run(root: Path) -> list[Row]:
    rows: list[Row] = []
    ctl = ProcessGroup(root / "controller")
    try:
        await ctl.start()
        await ctl.wait_ready()
        m = await ctl.wait_master()
        pids = [b.proc.pid for b in ctl.brokers if b.proc is not None]
        ranks = [m] + [i for i in range(3) if i != m]
        ctl_rate, ctl_cpu, ctl_p99 = await ha.batched(ctl.brokers[m].addr,
                                                      [pids[i] for i in ranks] + [os.getpid()])
    finally:
        await ctl.close()

    (root / "single").mkdir()
    single = BrokerProcess(root / "single", "127.0.0.62", brokerName="bench-single")
    g = DLedgerProcessGroup(root / "dledger")
    try:
        await single.start()
        assert single.proc is not None
        await g.start()
        await g.wait_leader()
        await g.wait_caught_up()
        # Alternating phases: what else the shared cores run changes within seconds,
        # and hits both sides of each pair alike.
        plain_runs, group_runs = [], []
        rounds = Rounds()
        repeated = 0
        for k in range(ROUNDS):
            for side in order(k):
                if side == PLAIN:
                    plain_runs.append(await ha.batched(single.addr,
                                                       [single.proc.pid, os.getpid()]))
                    rounds.plain.append(plain_runs[-1][0])
                    continue
                while True:
                    try:
                        run, problem = await _group_phase(g)
                        break
                    except BrokerError as exc:
                        # Elected anew mid-phase (a replica starved of CPU for longer
                        # than the election timeout): counted and shown, and the phase
                        # repeated.
                        repeated += 1
                        if repeated > 2 * ROUNDS:
                            raise
                        log.warning("DLedger phase repeated: %s", exc)
                group_runs.append(run)
                rounds.replicated.append(run[0])
                rounds.add_problem(k, problem)
        await single.stop()
        written = (copies_on_disk(root / "dledger"), copies_on_disk(root / "single"))
        plain, plain_cpu, plain_p99 = _median_run(plain_runs)
        rate, per_msg, p99 = _median_run(group_runs)
        rows.append(Row(NAME, "unreplicated broker, batched 1 KiB", plain, "msgs/s",
                        note=f"median of {ROUNDS} phases alternating with the DLedger group's; "
                             f"p99 ack {plain_p99:.1f} ms; "
                             + cpu_note(["broker", "client"], plain_cpu)))
        rows.append(Row(NAME, "controller mode, allAckInSyncStateSet, batched 1 KiB", ctl_rate,
                        "msgs/s", "", plain, note=f"p99 ack {ctl_p99:.1f} ms; " + cpu_note(
                            ["master", "slave", "slave", "client"], ctl_cpu)))
        rows.append(Row(NAME, rounds.metric("DLedger group of 3, batched 1 KiB"), rate,
                        "msgs/s", ">= 0.7 x unreplicated", plain,
                        note=f"{rounds.note()}; phases repeated after a leader change "
                        f"{repeated}; p99 ack {p99:.1f} ms; "
                        + cpu_note(["leader", "follower", "follower", "client"], per_msg)
                        + "; " + await built_note(g)))
        rows.append(ha.cpu_limit_row(NAME, "DLedger group of 3", plain, per_msg))
        rows.append(cpu_bound_ratio_row(per_msg, plain_cpu))
        rows.append(copies_row(*written))
        n_kills = int(os.environ.get("DLEDGER_BENCH_KILLS", FAULTS_DEFAULT))
        n_hangs = int(os.environ.get("DLEDGER_BENCH_HANGS", FAULTS_DEFAULT))
        if n_kills or n_hangs:
            assert g.namesrv is not None
            proxy = await start_proxy(root, "dledger-a", namesrvAddr=g.namesrv.addr)
            try:
                kills, hangs, failures = await ha.failover(g, proxy.addr, n_kills, n_hangs)
            finally:
                await proxy.kill()
            rows += ha.failover_rows(NAME, "leader", kills, hangs, failures, 1.5, 3.0)
    finally:
        await single.stop()
        await g.close()
    return rows


def run() -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="bench-dledger-") as tmp:
        return asyncio.run(_run(Path(tmp)))
