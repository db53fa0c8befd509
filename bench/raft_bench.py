"""Raft group benchmark: 3 ``mqraft`` processes on loopback, 1 KiB entries, fsync per batch.

Rows:
- raw fsync rate of the disk the stores are on (1 KiB append + fsync), the
  ceiling for anything that fsyncs per entry;
- committed entries/s with clients proposing batches (several batches in
  flight), compared to the fsync rate: above 1.0 means batching works;
- p50/p99 commit latency of single entries proposed at a paced 1,000/s, and the
  same with the three stores on tmpfs (same code, no disk cost): the difference
  is what the replicas' fsyncs on this one shared disk cost;
- election time after SIGKILL of the leader (median and max over several kills),
  with the default timings of ``RaftConfig``.

Environment knobs (for quick runs): MQBENCH_SECONDS (default 5), MQBENCH_KILLS (5).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from bench import Row, cpu_seconds
from mqcluster.raft.node import RunnerOptions
from mqcluster_testing.raft.client import RaftClient
from mqcluster_testing.raft.localgroup import LocalGroup

NAME = "raft"
ENTRY = 1024
SECONDS = float(os.environ.get("MQBENCH_SECONDS", "5"))
KILLS = int(os.environ.get("MQBENCH_KILLS", "5"))
BATCH = 256  # values per client request
IN_FLIGHT = 8  # concurrent client requests
SERVER_ARGS = ["--keep", "1000", "--max-batch-entries", "512", "--log-level", "WARNING"]


def fsync_probe(directory: Path, seconds: float = 1.0) -> tuple[float, list[float]]:
    """Raw disk: 1 KiB append + fsync in a loop; (fsyncs per second, latencies in ms)."""
    directory.mkdir(exist_ok=True)
    path = directory / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    block = b"x" * ENTRY
    latencies: list[float] = []
    try:
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            t = time.perf_counter()
            os.write(fd, block)
            os.fsync(fd)
            latencies.append((time.perf_counter() - t) * 1000)
        return len(latencies) / (time.perf_counter() - start), latencies
    finally:
        os.close(fd)
        path.unlink()


def replica_fsync_probe(directory: Path, seconds: float = 0.5) -> list[float]:
    """Three writers at once, as the three replicas on this one disk: latencies in ms.

    Each fsync also waits for the others' device flushes, which a single writer never
    sees; this, not the single-writer figure, is the floor under commit latency here."""
    results: list[list[float]] = [[] for _ in range(3)]

    def writer(i: int) -> None:
        _, results[i] = fsync_probe(directory / f"replica-{i}", seconds)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [ms for lat in results for ms in lat]


def fsync_bandwidth(directory: Path, seconds: float = 1.0) -> float:
    """MB/s of 512 KiB appends, each followed by an fsync (one stream)."""
    path = directory / "bandwidth-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    block = os.urandom(512 * 1024)
    n = 0
    try:
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            os.write(fd, block)
            os.fsync(fd)
            n += 1
        return n * 0.5 / (time.perf_counter() - start)
    finally:
        os.close(fd)
        path.unlink()


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def throughput(client: RaftClient, seconds: float) -> tuple[float, int]:
    """Committed entries/s with IN_FLIGHT batches of BATCH values in flight."""
    stop = time.monotonic() + seconds
    committed = 0
    seq = 0

    async def worker(w: int) -> None:
        nonlocal committed, seq
        while time.monotonic() < stop:
            seq += 1
            prefix = f"w{w}-{seq}-".encode()
            values = [prefix + i.to_bytes(4, "big") + bytes(ENTRY - len(prefix) - 4)
                      for i in range(BATCH)]
            first, last = await client.propose(values)
            committed += last - first + 1

    started = time.monotonic()
    await asyncio.gather(*(worker(w) for w in range(IN_FLIGHT)))
    return committed / (time.monotonic() - started), committed


async def paced_latency(client: RaftClient, rate: float, seconds: float) -> list[float]:
    """Open loop: one single-entry proposal every 1/rate s; latency of each, in ms."""
    latencies: list[float] = []
    value = bytes(ENTRY)
    tasks: list[asyncio.Task[None]] = []

    async def one(t_send: float) -> None:
        await client.propose([value])
        latencies.append((time.perf_counter() - t_send) * 1000)

    start = time.perf_counter()
    n = int(rate * seconds)
    for i in range(n):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(time.perf_counter())))
    await asyncio.gather(*tasks)
    return latencies


async def election_times(group: LocalGroup, client: RaftClient, kills: int) -> list[float]:
    times: list[float] = []
    for _ in range(kills):
        leader = await client.wait_leader(timeout=20)
        await client.propose([b"before-kill"])
        group.kill(leader)
        killed = time.monotonic()
        await client.wait_leader(timeout=20, exclude=[leader], poll=0.002)
        times.append(time.monotonic() - killed)
        group.start(leader)
        # Next round only once the restarted member follows again.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            doc = await client.status(leader)
            if doc is not None and doc["role"] == "FOLLOWER":
                break
            await asyncio.sleep(0.02)
    return times


async def leader_stats(client: RaftClient) -> dict[str, float]:
    assert client.leader is not None
    doc = await client.status(client.leader)
    assert doc is not None
    stats: dict[str, float] = doc["stats"]
    return stats


async def measure(root: Path) -> list[Row]:
    rows: list[Row] = []
    load = os.getloadavg()[0]
    rows.append(Row(NAME, "host load average (1 min) at start", load, "",
                    note=f"{os.cpu_count()} CPUs; other work on the host slows every figure"))
    fsyncs, fsync_ms = fsync_probe(root)
    rows.append(Row(NAME, "raw fsync rate (1 KiB append+fsync)", fsyncs, "fsync/s",
                    note="same disk as the stores, measured in this run"))
    rows.append(Row(NAME, "raw fsync latency p50 / p99", percentile(fsync_ms, 50), "ms",
                    note=f"p99 {percentile(fsync_ms, 99):.3f} ms"))
    bandwidth = fsync_bandwidth(root)
    rows.append(Row(NAME, "raw fsync'd write bandwidth (512 KiB)", bandwidth, "MB/s",
                    note=f"3 replicas on this disk: ceiling {bandwidth * 1e6 / 3 / ENTRY:,.0f} "
                         "entries/s"))
    with LocalGroup(root, extra_args=SERVER_ARGS) as group:
        group.start_all()
        client = RaftClient(group.peers, timeout=10)
        try:
            await client.wait_leader(timeout=20)
            await client.propose([b"warm-up"] * 64)
            before = await leader_stats(client)
            pids = [p.pid for p in group.procs.values()]
            cpu0, t0 = cpu_seconds(pids), time.monotonic()
            rate, n = await throughput(client, SECONDS)
            cpu = cpu_seconds(pids) - cpu0
            wall = time.monotonic() - t0
            after = await leader_stats(client)
            batches = after["persists"] - before["persists"]
            per_batch = (after["persisted_entries"] - before["persisted_entries"]) / max(1, batches)
            rows.append(Row(NAME, "committed 1 KiB entries/s (3 procs)", rate, "entries/s",
                            ">= 30,000", limit=fsyncs,
                            note=f"{n} entries; clients: {IN_FLIGHT} x {BATCH}-value batches "
                                 "in flight; ratio = entries per raw fsync"))
            rows.append(Row(NAME, "entries per fsync'd batch (leader)", per_batch, "entries",
                            note="during the throughput run"))
            rows.append(Row(NAME, "server CPU per committed entry (3 procs)", cpu / n * 1e6,
                            "us", note=f"servers used {cpu / wall:.2f} of {os.cpu_count()} CPUs"))

            _, around_before = fsync_probe(root, 0.5)
            replicas_before = replica_fsync_probe(root)
            before = await leader_stats(client)
            leader_pid = group.procs[client.leader or ""].pid
            everyone = [*pids, os.getpid()]  # the servers and this client
            cpu0, leader_cpu0 = cpu_seconds(everyone), cpu_seconds([leader_pid])
            t0 = time.monotonic()
            lat = await paced_latency(client, 1000, SECONDS)
            wall = time.monotonic() - t0
            busy = (cpu_seconds(everyone) - cpu0) / wall
            leader_busy = (cpu_seconds([leader_pid]) - leader_cpu0) / wall
            after = await leader_stats(client)
            _, around_after = fsync_probe(root, 0.5)
            replicas_ms = replicas_before + replica_fsync_probe(root)
            disk_p99 = max(percentile(around_before, 99), percentile(around_after, 99))
            persists = max(1, after["persists"] - before["persists"])
            persist_ms = 1000 * (after["persist_seconds"] - before["persist_seconds"]) / persists
            disk_p50 = max(percentile(around_before, 50), percentile(around_after, 50))
            rows.append(Row(NAME, "commit latency p50 @ 1,000/s", percentile(lat, 50), "ms",
                            limit=disk_p50,
                            note=f"{len(lat)} single-entry proposals, client RPC included; "
                                 "limit = raw fsync p50 around this run"))
            rows.append(Row(NAME, "commit latency p99 @ 1,000/s", percentile(lat, 99), "ms",
                            "< 10 ms", limit=disk_p99,
                            note="limit = raw fsync p99 just before/after this run"))
            rows.append(Row(NAME, "raw fsync p50 / p99, 3 writers at once", percentile(
                replicas_ms, 50), "ms", note=f"p99 {percentile(replicas_ms, 99):.3f} ms; three "
                "threads, 1 KiB append + fsync each, just before/after this run: what the "
                "replicas' fsyncs cost when they share this disk"))
            rows.append(Row(NAME, "CPUs busy @ 1,000/s (3 servers + client)", busy, "CPU",
                            limit=float(os.cpu_count() or 1),
                            note=f"leader alone {leader_busy:.2f}; ratio = share of the host's "
                                 "CPUs, where queueing for a core shows up in the p99"))
            rows.append(Row(NAME, "leader fsync time @ 1,000/s", persist_ms, "ms",
                            note=f"{persists / wall:.0f} per s, each covering what the leader "
                                 f"wrote in the {RunnerOptions().leader_sync_delay * 1000:g} ms "
                                 "before; followers' acks commit meanwhile"))
            low = await paced_latency(client, 100, min(SECONDS, 3.0))
            rows.append(Row(NAME, "commit latency p50 / p99 @ 100/s", percentile(low, 50), "ms",
                            note=f"p99 {percentile(low, 99):.2f} ms, {len(low)} proposals"))

            rows.extend(await tmpfs_latency_rows())
            times = await election_times(group, client, KILLS)
            rows.append(Row(NAME, "new leader after SIGKILL (median)",
                            statistics.median(times) * 1000, "ms", "< 1,000 ms",
                            note=f"{len(times)} kills, default RaftConfig timings"))
            rows.append(Row(NAME, "new leader after SIGKILL (max)", max(times) * 1000, "ms"))
        finally:
            await client.close()
    return rows


async def tmpfs_latency_rows() -> list[Row]:
    """Commit latency at 1,000/s with the three stores in RAM (tmpfs), same processes."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        return []
    with (
        tempfile.TemporaryDirectory(prefix="mqraft-bench-", dir=shm) as tmp,
        LocalGroup(Path(tmp), extra_args=SERVER_ARGS) as group,
    ):
        group.start_all()
        client = RaftClient(group.peers, timeout=10)
        try:
            await client.wait_leader(timeout=20)
            await client.propose([b"warm-up"] * 64)
            lat = await paced_latency(client, 1000, SECONDS)
        finally:
            await client.close()
    return [Row(NAME, "commit latency p50 / p99 @ 1,000/s, tmpfs", percentile(lat, 50), "ms",
                note=f"p99 {percentile(lat, 99):.2f} ms; the same group with its three stores "
                     "on tmpfs (fsync costs nothing): what this host's CPUs alone allow")]


def run() -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="mqraft-bench-", dir=os.environ.get("TMPDIR")) as tmp:
        return asyncio.run(measure(Path(tmp)))
