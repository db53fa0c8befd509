"""Controller benchmarks (RIP-44): committed ops/s, and master failover latency.

- ``alterSyncStateSet`` on 100 broker groups against 3 controller processes,
  one request in flight per group (a group's requests are serialised, as a
  master sends them): committed operations per second.
- Failover: a master stand-in process is SIGKILLed (its connections close)
  or SIGSTOPped (hung: only the heartbeat timeout reveals it). Measured on
  the controller that elected (the active one then; leadership may move during
  the run): detection = last heartbeat received -> election decided;
  consensus = decided -> ElectMaster applied; total = their sum. The
  stand-ins heartbeat and the controllers scan with the shipped defaults
  (``brokerHeartbeatInterval``, ``controllerHeartBeatTimeoutMills``,
  ``scanNotActiveBrokerInterval``): the figures are what a user gets.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import Row
from mqcluster.broker.config import BrokerConfig
from mqcluster.client.controller import ControllerClient
from mqcluster.controller.config import ControllerConfig
from mqcluster.protocol.controller import BrokerHeartbeatRequestHeader
from mqcluster_testing import child_env
from mqcluster_testing.controller.localcluster import LocalControllerCluster
from mqcluster_testing.controller.standin import StandInBroker

NAME = "controller"
HEARTBEAT_MS: int = BrokerConfig.model_fields["brokerHeartbeatInterval"].default
TIMEOUT_MS: int = BrokerConfig.model_fields["controllerHeartBeatTimeoutMills"].default
SCAN_MS: int = ControllerConfig.model_fields["scanNotActiveBrokerInterval"].default
GROUPS = 100
THROUGHPUT_SECONDS = 3.0
KILL_TRIALS = 5
HANG_TRIALS = 3
CLUSTER = "bench"


def _loopback_addrs(n: int, base: int) -> list[str]:
    import socket

    out = []
    for i in range(n):
        host = f"127.0.0.{base + i}"
        with socket.socket() as s:
            s.bind((host, 0))
            out.append(f"{host}:{s.getsockname()[1]}")
    return out


def _free_port(host: str) -> int:
    import socket

    with socket.socket() as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


async def _prepare_groups(client: ControllerClient, n: int) -> None:
    async def one(g: int) -> None:
        name = f"g{g}"
        for bid in (1, 2):
            check_code = f"127.0.1.{g + 1}:{bid};bench-{g}-{bid}"
            await client.apply_broker_id(CLUSTER, name, bid, check_code)
            await client.register_broker(CLUSTER, name, bid, f"127.0.1.{g + 1}:{bid}")
            await client.heartbeat(
                BrokerHeartbeatRequestHeader(
                    cluster_name=CLUSTER, broker_addr=f"127.0.1.{g + 1}:{bid}", broker_name=name,
                    broker_id=bid, epoch=1, max_offset=0, confirm_offset=0,
                    heartbeat_timeout_mills=600_000, election_priority=0),
                oneway=False,
            )
        await client.elect_master(CLUSTER, name, 1)

    await asyncio.gather(*(one(g) for g in range(n)))


async def _throughput(cluster: LocalControllerCluster) -> tuple[float, int, float, float]:
    """(committed ops/s, errors, median latency in ms under load, and alone)."""
    client = ControllerClient(cluster.controller_addr, retry_timeout=20)
    try:
        await _prepare_groups(client, GROUPS)
        count = 0
        errors = 0
        stop_at = 0.0
        latencies: list[float] = []
        epochs = dict.fromkeys(range(GROUPS), 1)
        toggles = dict.fromkeys(range(GROUPS), False)

        async def loop(g: int) -> None:
            nonlocal count, errors
            name = f"g{g}"
            epoch, toggle = epochs[g], toggles[g]
            while time.monotonic() < stop_at:
                members = {1} if toggle else {1, 2}
                sent = time.perf_counter()
                try:
                    result = await client.alter_sync_state_set(name, 1, 1, members, epoch)
                except Exception:
                    errors += 1
                    info = await client.get_replica_info(name)
                    epoch, toggle = info.sync_state_set_epoch, info.sync_state_set == {1, 2}
                    continue
                epoch, toggle = result.sync_state_set_epoch, not toggle
                latencies.append(time.perf_counter() - sent)
                count += 1
            epochs[g], toggles[g] = epoch, toggle

        single: list[float] = []
        epoch, toggle = 1, False
        for _ in range(100):  # one request in flight in the whole system
            sent = time.perf_counter()
            members = {1} if toggle else {1, 2}
            result = await client.alter_sync_state_set("g0", 1, 1, members, epoch)
            single.append(time.perf_counter() - sent)
            epoch, toggle = result.sync_state_set_epoch, not toggle
        epochs[0], toggles[0] = epoch, toggle
        single_p50 = statistics.median(single) * 1000

        stop_at = time.monotonic() + 0.5  # warm-up
        await asyncio.gather(*(loop(g) for g in range(GROUPS)))
        count = 0
        latencies.clear()
        started = time.monotonic()
        stop_at = started + THROUGHPUT_SECONDS
        await asyncio.gather(*(loop(g) for g in range(GROUPS)))
        elapsed = time.monotonic() - started
        return count / elapsed, errors, statistics.median(latencies) * 1000, single_p50
    finally:
        await client.close()


def _spawn_master(cluster: LocalControllerCluster, group: str, store: Path, log: Path) -> Any:
    argv = [
        sys.executable, "-m", "mqcluster_testing.controller.standin",
        "--controllers", cluster.controller_addr, "--cluster", CLUSTER,
        "--broker-name", group, "--store", str(store), "--host", "127.0.0.1",
        "--epoch", "1", "--heartbeat-interval", str(HEARTBEAT_MS / 1000),
        "--heartbeat-timeout-ms", str(TIMEOUT_MS),
    ]
    out = open(log, "wb")  # noqa: SIM115 - closed by the caller with the process
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=out, stdin=subprocess.DEVNULL,
                         env=child_env())
    return p, out


async def _read_registered(p: subprocess.Popen[bytes]) -> dict[str, Any]:
    assert p.stdout is not None
    line = await asyncio.to_thread(p.stdout.readline)
    if not line:
        raise RuntimeError("stand-in exited before registering")
    data: dict[str, Any] = json.loads(line)
    return data


def _election_record(cluster: LocalControllerCluster, group: str) -> dict[str, Any] | None:
    """The election that replaced ``group``'s master 1, from whichever controller did it:
    each lists only its own, and the active controller may have changed since the start
    (a controller stalled on a loaded machine loses its leadership)."""
    for node in cluster.ids:
        with contextlib.suppress(OSError, ValueError):
            records = [r for r in cluster.health(node)["recentElections"]
                       if r["broker_name"] == group and r["old_master"] == 1]
            if records:
                return records[-1]  # type: ignore[no-any-return]
    return None


async def _failover_trial(
    cluster: LocalControllerCluster, workdir: Path, group: str, sig: int
) -> dict[str, Any]:
    p, log = _spawn_master(cluster, group, workdir / group / "a", workdir / f"{group}.log")
    slave = StandInBroker(
        cluster.controller_addr, CLUSTER, group, workdir / group / "b", epoch=1,
        heartbeat_interval=HEARTBEAT_MS / 1000, heartbeat_timeout_ms=TIMEOUT_MS,
    )
    try:
        reg = await _read_registered(p)
        assert reg["masterBrokerId"] == reg["brokerId"] == 1, reg
        await slave.start()
        await slave.client.alter_sync_state_set(group, 1, reg["masterEpoch"], {1, 2}, 1)
        await asyncio.sleep(0.6)  # let the master heartbeat at least once more
        p.send_signal(sig)
        async with asyncio.timeout(15):
            await slave.notified.wait()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            record = await asyncio.to_thread(_election_record, cluster, group)
            if record is not None:
                return record
            await asyncio.sleep(0.05)
        raise RuntimeError(f"no election record for {group} on any controller")
    finally:
        await slave.close()
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.send_signal(signal.SIGKILL)
        p.wait()
        log.close()


async def _main() -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="controller-bench-") as tmp:
        workdir = Path(tmp)
        addrs = _loopback_addrs(3, 160)
        metrics = [_free_port(a.rpartition(":")[0]) for a in addrs]
        cluster = LocalControllerCluster(
            addrs, workdir / "controllers", metrics_ports=metrics,
            options={"snapshotThreshold": "100000"},
        )
        try:
            cluster.start_all()
            await cluster.wait_active(timeout=20)
            ops, errors, p50, single_p50 = await _throughput(cluster)
            rows.append(Row(
                NAME, "alterSyncStateSet committed (100 groups, 3 controllers)", ops, "ops/s",
                ">= 2,000",
                note=f"{errors} errors; one request in flight per group, p50 {p50:.1f} ms",
            ))
            rows.append(Row(
                NAME, "alterSyncStateSet latency, one request in flight", single_p50, "ms",
                note="p50 of 100 sequential requests; validate + Raft commit + apply",
            ))
            for label, sig, trials, target in (
                ("killed master", signal.SIGKILL, KILL_TRIALS, "median < 1 s"),
                ("hung master (SIGSTOP)", signal.SIGSTOP, HANG_TRIALS, "median < 3 s"),
            ):
                records = [
                    await _failover_trial(cluster, workdir, f"{sig.name}-{i}", sig)
                    for i in range(trials)
                ]
                det = [(r["detection_ms"] or 0) / 1000 for r in records]
                con = [r["consensus_ms"] / 1000 for r in records]
                tot = [d + c for d, c in zip(det, con, strict=True)]
                rows.append(Row(NAME, f"{label}: last heartbeat -> ElectMaster applied",
                                statistics.median(tot), "s", target,
                                note=f"n={trials}, max {max(tot):.2f} s; shipped detection: "
                                     f"heartbeat {HEARTBEAT_MS} ms, timeout {TIMEOUT_MS} ms, "
                                     f"scan {SCAN_MS} ms"))
                rows.append(Row(NAME, f"{label}: detection", statistics.median(det), "s",
                                note="last heartbeat -> decision"))
                rows.append(Row(NAME, f"{label}: consensus", statistics.median(con), "s",
                                note="decision -> applied"))
        finally:
            cluster.kill_all()
    return rows


def run() -> list[Row]:
    return asyncio.run(_main())


if __name__ == "__main__":
    from bench import render_table

    print(render_table(run()))
