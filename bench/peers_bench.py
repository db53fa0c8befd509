"""mqcluster beside the peers people would run instead, same machine, same run.

Each system as a 3-replica group on loopback, 1 KiB messages:

* sync publish latency (one message at a time, waiting for the ack: mqcluster with
  allAckInSyncStateSet or DLedger, RabbitMQ publisher confirms, JetStream PubAck), p50/p99;
* pipelined publish throughput (``WINDOW`` messages outstanding, for ``SECONDS``);
* consumer drain rate (everything published so far, acknowledged in batches);
* failover: the longest gap between acknowledged publishes of a producer running
  throughout, after SIGKILL of the leader (median and max over ``PEERS_BENCH_KILLS``), and
  whether every acknowledged message could be read back afterwards.

Ratios are mqcluster (controller mode) to each peer, measured in this run. CPU
microseconds per published message are printed for each system's server processes.
A peer that cannot run here is a row saying why. ``--quick`` (``PEERS_BENCH_QUICK=1``)
shortens every phase for a smoke run.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench import Row, cpu_seconds
from bench.peer_servers import NatsCluster, PeerUnavailable

NAME = "peers"
MSG = 1024
QUICK = os.environ.get("PEERS_BENCH_QUICK") == "1"
SYNC_N = 200 if QUICK else 1000
SECONDS = 2.0 if QUICK else 5.0
WINDOW = 64
KILLS = int(os.environ.get("PEERS_BENCH_KILLS", "1" if QUICK else "3"))


@dataclass
class Result:
    system: str
    p50_ms: float | None = None
    p99_ms: float | None = None
    pipelined: float | None = None
    drain: float | None = None
    failover: list[float] = field(default_factory=list)
    lost: int | None = None
    cpu_us: float | None = None
    error: str | None = None


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


async def sync_latency(publish: Callable[[bytes], Awaitable[None]], n: int) -> list[float]:
    payload = random.randbytes(MSG)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await publish(payload)
        out.append(time.perf_counter() - t0)
    return out


async def pipelined(publish: Callable[[bytes], Awaitable[None]], seconds: float,
                    window: int) -> int:
    payload = random.randbytes(MSG)
    deadline = time.perf_counter() + seconds
    count = 0

    async def lane() -> None:
        nonlocal count
        while time.perf_counter() < deadline:
            await publish(payload)
            count += 1  # after the await: each lane adds its own ack

    await asyncio.gather(*(lane() for _ in range(window)))
    return count


def gap_after(acks: list[float], t: float) -> float:
    """Longest gap between acks from the last one before ``t`` to the third after it."""
    acks = sorted(acks)
    before = [a for a in acks if a <= t]
    after = [a for a in acks if a > t][:3]
    window = before[-1:] + after
    return max((b - a for a, b in itertools.pairwise(window)), default=0.0)


# ----------------------------------------------------------------------------- NATS

async def measure_nats(root: Path) -> Result:
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig, StorageType, StreamConfig

    res = Result("NATS JetStream (replicas=3)")
    cluster = NatsCluster(root / "nats")
    cluster.start()
    nc = None
    try:
        nc = await nats.connect(servers=[f"nats://{a}" for a in cluster.client_addrs],
                                max_reconnect_attempts=-1, reconnect_time_wait=0.05,
                                connect_timeout=2)
        js = nc.jetstream(timeout=5)
        deadline = time.monotonic() + 60
        while True:  # the meta group elects its leader after the routes connect
            try:
                await js.add_stream(StreamConfig(name="BENCH", subjects=["bench"],
                                                 num_replicas=3, storage=StorageType.FILE))
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)

        async def publish(payload: bytes) -> None:
            await js.publish("bench", payload)

        cpu0 = cpu_seconds(cluster.pids())
        lat = await sync_latency(publish, SYNC_N)
        res.p50_ms, res.p99_ms = percentile(lat, 0.5) * 1e3, percentile(lat, 0.99) * 1e3
        n = await pipelined(publish, SECONDS, WINDOW)
        res.pipelined = n / SECONDS
        res.cpu_us = (cpu_seconds(cluster.pids()) - cpu0) / (n + SYNC_N) * 1e6
        total = n + SYNC_N
        sub = await js.pull_subscribe("bench", durable="drain",
                                      config=ConsumerConfig(ack_policy=AckPolicy.ALL))
        got, t0 = 0, time.perf_counter()
        while got < total:
            msgs = await sub.fetch(256, timeout=5)
            got += len(msgs)
            await msgs[-1].ack()
        res.drain = got / (time.perf_counter() - t0)
        res.failover, res.lost = await nats_failover(cluster, js)
    finally:
        if nc is not None:
            with contextlib.suppress(Exception):
                await nc.close()
        cluster.stop()
    return res


async def nats_failover(cluster: NatsCluster, js: object) -> tuple[list[float], int]:
    from nats.js.api import StorageType, StreamConfig

    jsc = js  # nats.js.JetStreamContext
    await jsc.add_stream(StreamConfig(name="FAIL", subjects=["fail"], num_replicas=3,  # type: ignore[attr-defined]
                                      storage=StorageType.FILE))
    acked: dict[str, float] = {}
    stop = asyncio.Event()

    async def producer() -> None:
        n = 0
        while not stop.is_set():
            key = f"k{n}"
            try:
                await jsc.publish("fail", key.encode(), timeout=1)  # type: ignore[attr-defined]
                acked[key] = time.monotonic()
                n += 1
            except Exception:
                await asyncio.sleep(0.01)  # the same key again: only acks count

    task = asyncio.ensure_future(producer())
    gaps = []
    try:
        for _ in range(KILLS):
            await asyncio.sleep(1.0)
            info = await jsc.stream_info("FAIL")  # type: ignore[attr-defined]
            leader = info.cluster.leader
            t = time.monotonic()
            cluster.kill(leader)
            before = len(acked)
            while len([a for a in acked.values() if a > t]) < 3:
                await asyncio.sleep(0.02)
                if time.monotonic() - t > 60:
                    break
            gaps.append(gap_after(list(acked.values()), t))
            del before
            cluster.restart(leader)
            await asyncio.sleep(3.0)  # the restarted server catches up before the next kill
    finally:
        stop.set()
        await task
    info = await jsc.stream_info("FAIL")  # type: ignore[attr-defined]
    lost = max(0, len(acked) - int(info.state.messages))
    return gaps, lost


# ------------------------------------------------------------------------- mqcluster

async def measure_mqcluster(root: Path, mode: str) -> Result:
    from bench import ha_bench as ha
    from mqcluster.client import AdminClient, Message, Producer, PullConsumer
    from tests.broker.procs import start_proxy
    from tests.ha.cluster import GROUP, ProcessGroup
    from tests.ha.dledger_cluster import DLedgerProcessGroup

    if mode == "Controller":
        res = Result("mqcluster controller mode (allAckInSyncStateSet)")
        group: ProcessGroup | DLedgerProcessGroup = ProcessGroup(root / "mq-ctl")
    else:
        res = Result("mqcluster DLedger mode")
        group = DLedgerProcessGroup(root / "mq-dl")
    try:
        await group.start()
        m = await group.wait_master()
        await group.wait_ready()
        addr = group.brokers[m].addr
        pids = [b.proc.pid for b in group.brokers if b.proc is not None]
        topic = "PeerBench"
        for b in group.brokers:
            async with AdminClient(broker_addr=b.addr) as admin:
                await admin.create_topic(topic, queue_nums=8)
        async with Producer(broker_addr=addr, auto_batch=True, retries=0) as producer:
            async def publish(payload: bytes) -> None:
                await producer.send(Message(topic, payload))

            cpu0 = cpu_seconds(pids)
            lat = await sync_latency(publish, SYNC_N)
            res.p50_ms, res.p99_ms = percentile(lat, 0.5) * 1e3, percentile(lat, 0.99) * 1e3
            n = await pipelined(publish, SECONDS, WINDOW)
            res.pipelined = n / SECONDS
            res.cpu_us = (cpu_seconds(pids) - cpu0) / (n + SYNC_N) * 1e6
        total = n + SYNC_N
        async with PullConsumer("PeerDrain", broker_addr=addr) as consumer:
            got, t0 = 0, time.perf_counter()
            while got < total:
                batch = await consumer.receive(topic, 256)
                if not batch:
                    break
                got += len(batch)
                await consumer.commit()
            res.drain = got / (time.perf_counter() - t0)
        for b in group.brokers:  # the failover producer's topic, on every replica
            async with AdminClient(broker_addr=b.addr) as admin:
                await admin.create_topic(ha.TOPIC, queue_nums=4)
        assert group.namesrv is not None
        proxy = await (start_proxy(root, GROUP, controllerAddr=group.controllers.controller_addr)
                       if isinstance(group, ProcessGroup)
                       else start_proxy(root, "dledger-a", namesrvAddr=group.namesrv.addr))
        acked: list[int] = []
        try:
            res.failover, _, _ = await ha.failover(group, proxy.addr, KILLS, 0, acked)
        finally:
            await proxy.kill()
        master = group.brokers[await group.wait_master()].addr
        res.lost = max(0, acked[0] - await stored_count(master, ha.TOPIC))
    finally:
        await group.close()
    return res


async def stored_count(addr: str, topic: str) -> int:
    """Messages of ``topic`` the master holds (client retries may add duplicates, so a
    count at least the acknowledged count is what is checked, as for the peers)."""
    from mqcluster.client import PullConsumer

    total = 0
    async with PullConsumer("PeerBenchCount", broker_addr=addr) as consumer:
        for queue in await consumer.queues(topic):
            total += await consumer.max_offset(queue) - await consumer.min_offset(queue)
    return total


# ----------------------------------------------------------------------------- table

def rows_for(results: list[Result]) -> list[Row]:
    base = results[0]
    rows: list[Row] = []
    for r in results:
        if r.error:
            rows.append(Row(NAME, f"{r.system}: not measured", None, note=r.error))
            continue
        rows += [
            Row(NAME, f"{r.system}: sync publish p50", r.p50_ms, "ms",
                note=f"p99 {r.p99_ms:.2f} ms" if r.p99_ms is not None else ""),
            Row(NAME, f"{r.system}: pipelined publish ({WINDOW} outstanding)", r.pipelined,
                "msgs/s",
                note=f"CPU us/msg, servers: {r.cpu_us:.0f}" if r.cpu_us else ""),
            Row(NAME, f"{r.system}: consumer drain", r.drain, "msgs/s"),
        ]
        if r.failover:
            rows.append(Row(NAME, f"{r.system}: failover gap after SIGKILL of the leader "
                                  f"(median)", statistics.median(r.failover), "s",
                            note=f"max {max(r.failover):.2f} s over {len(r.failover)}; "
                                 f"acknowledged but lost: {r.lost}"))
    return ratio_rows(base, results, rows)


def ratio_rows(base: Result, results: list[Result], rows: list[Row]) -> list[Row]:
    for r in results[1:]:
        if r.error or base.error or r.system.startswith("mqcluster"):
            continue
        if r.pipelined and base.pipelined:
            rows.append(Row(NAME, f"mqcluster / {r.system}: pipelined throughput",
                            base.pipelined / r.pipelined, "x", ">= 1 x the best peer"))
        if r.failover and base.failover:
            rows.append(Row(NAME, f"mqcluster / {r.system}: failover gap (median)",
                            statistics.median(base.failover) / statistics.median(r.failover),
                            "x", "<= 1 x the best peer"))
    return rows


async def _run(root: Path) -> list[Row]:
    results: list[Result] = []
    for label, measure in (
        ("mqcluster controller mode (allAckInSyncStateSet)",
         lambda: measure_mqcluster(root, "Controller")),
        ("mqcluster DLedger mode", lambda: measure_mqcluster(root, "DLedger")),
        ("NATS JetStream (replicas=3)", lambda: measure_nats(root)),
        ("RabbitMQ quorum queue (3 members)", lambda: measure_rabbitmq(root)),
    ):
        try:
            results.append(await measure())
        except PeerUnavailable as exc:
            results.append(Result(label, error=str(exc)))
        except Exception as exc:
            results.append(Result(label, error=f"{type(exc).__name__}: {exc}"[:300]))
    return rows_for(results)


async def measure_rabbitmq(root: Path) -> Result:
    from bench.peer_rabbitmq import measure

    result: Result = await measure(root / "rabbit", SYNC_N, SECONDS, WINDOW, KILLS)
    return result


def run() -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        return asyncio.run(_run(Path(tmp)))
