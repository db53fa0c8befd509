"""RabbitMQ quorum queues (3 members) for the peers bench, driven with aio-pika."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from bench import cpu_seconds
from bench.peer_servers import RabbitCluster


async def measure(root: Path, sync_n: int, seconds: float, window: int, kills: int) -> Any:
    import aio_pika

    from bench.peers_bench import Result, percentile, pipelined, sync_latency

    res = Result("RabbitMQ quorum queue (3 members)")
    cluster = RabbitCluster(root)
    try:
        await asyncio.to_thread(cluster.start)
        url = f"amqp://guest:guest@127.0.0.1:{cluster.ports[0]}/"
        conn = await aio_pika.connect_robust(url)
        try:
            ch = await conn.channel(publisher_confirms=True)
            queue = await ch.declare_queue("bench", durable=True,
                                           arguments={"x-queue-type": "quorum"})

            async def publish(payload: bytes) -> None:
                await ch.default_exchange.publish(
                    aio_pika.Message(payload, delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                    routing_key="bench")

            pids = cluster.pids()
            cpu0 = cpu_seconds(pids)
            lat = await sync_latency(publish, sync_n)
            res.p50_ms, res.p99_ms = percentile(lat, 0.5) * 1e3, percentile(lat, 0.99) * 1e3
            n = await pipelined(publish, seconds, window)
            res.pipelined = n / seconds
            res.cpu_us = (cpu_seconds(pids) - cpu0) / (n + sync_n) * 1e6
            total = n + sync_n
            await ch.set_qos(prefetch_count=512)
            got, t0 = 0, time.perf_counter()
            async with queue.iterator() as it:
                async for message in it:
                    got += 1
                    if got % 256 == 0 or got == total:
                        await message.ack(multiple=True)
                    if got >= total:
                        break
            res.drain = got / (time.perf_counter() - t0)
        finally:
            await conn.close()
        res.failover, res.lost = await failover(cluster, kills)
    finally:
        await asyncio.to_thread(cluster.stop)
    return res


def leader_of(cluster: RabbitCluster, queue: str) -> int:
    out = cluster.ctl(0, "list_queues", "name", "leader", "--quiet", "--no-table-headers")
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == queue:
            return cluster.nodes.index(parts[1])
    raise RuntimeError(f"no leader listed for {queue}: {out!r}")


async def failover(cluster: RabbitCluster, kills: int) -> tuple[list[float], int]:
    import aio_pika

    from bench.peers_bench import gap_after

    gaps: list[float] = []
    acked: list[float] = []
    stop = asyncio.Event()
    setup = await aio_pika.connect_robust(f"amqp://guest:guest@127.0.0.1:{cluster.ports[0]}/")
    ch = await setup.channel()
    await ch.declare_queue("fail", durable=True, arguments={"x-queue-type": "quorum"})
    await setup.close()
    leader = await asyncio.to_thread(leader_of, cluster, "fail")
    # The producer talks to a member that is not killed: what is measured is the queue's
    # own failover, not the client's reconnection.
    via = next(i for i in range(cluster.size) if i != leader)
    conn = await aio_pika.connect_robust(f"amqp://guest:guest@127.0.0.1:{cluster.ports[via]}/")
    pch = await conn.channel(publisher_confirms=True)

    async def producer() -> None:
        while not stop.is_set():
            try:
                await asyncio.wait_for(pch.default_exchange.publish(
                    aio_pika.Message(b"x", delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                    routing_key="fail"), 5)
                acked.append(time.monotonic())
            except Exception:
                await asyncio.sleep(0.01)

    task = asyncio.ensure_future(producer())
    try:
        for _ in range(kills):
            await asyncio.sleep(1.0)
            leader = await asyncio.to_thread(leader_of, cluster, "fail")
            if leader == via:
                break  # the member the producer uses leads now: stop here
            t = time.monotonic()
            cluster.kill(leader)
            while len([a for a in acked if a > t]) < 3 and time.monotonic() - t < 60:
                await asyncio.sleep(0.02)
            gaps.append(gap_after(acked, t))
            (cluster.root / f"r{leader}.out").write_text("")  # the next boot line is its
            await asyncio.to_thread(cluster.start_node, leader)
            await asyncio.to_thread(cluster.wait_booted, leader)
    finally:
        stop.set()
        await task
    declared = await pch.declare_queue("fail", durable=True, passive=True)
    stored = declared.declaration_result.message_count or 0
    await conn.close()
    return gaps, max(0, len(acked) - stored)
