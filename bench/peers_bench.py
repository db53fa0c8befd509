"""mqcluster (controller mode, DLedger mode) against RabbitMQ quorum queues and NATS
JetStream, 3 replicas each, same machine, same run, 1 KiB messages.

Per system: sync one-at-a-time publish latency (p50/p99 until acknowledged: publisher
confirms, JetStream acks, the broker's send result), pipelined throughput (``WINDOW``
publishes outstanding), consumer drain rate, the longest gap between acknowledged
writes of a producer running while the leader is SIGKILLed ``KILLS`` times (for
mqcluster: ``ha_bench.failover`` with the official client), and the same loss check
for every system: every body carries its own id (a counter written into its first 8
bytes, in every phase), a consumer reads everything back at the end, and the ids
acknowledged are compared with the ids read: lost (acknowledged, never read) and
duplicated (read more than once). NATS and mqcluster are read from the start of the
stream/topic by a fresh consumer; a RabbitMQ queue hands each message out once, so its
drain's reads count, and what is left is read at the end. CPU us per message per
process for the pipelined phase.

Hang and partition rows, same measurement (the longest gap between acknowledged sends
around the fault, the ids checked as above): the leader is SIGSTOPped (``HANGS`` times)
and cut off the network (``PARTS`` times: every packet of its sockets dropped both
ways, ``bench/partition.py``, in a network namespace the bench makes for itself), held
until sends resume elsewhere or ``HOLD_S`` passed, then woken or healed. Every client
moves to another node after a failed send (mqcluster: the official client through an
``mqproxy``, which follows the controllers or the name server); a row notes how many
faults were only ridden out once healed. mqcluster runs with its shipped failure
detection. Peers are installed with apt-get when missing; a peer that cannot
start gets a row with the error. ``BENCH_QUICK=1`` (``python -m bench peers --quick``)
is a smoke run.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import os
import random
import signal
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import bench.ha_bench as ha
from bench import Row, cpu_seconds
from bench.partition import Partitions, unavailable
from bench.peer_launchers import NatsCluster, RabbitCluster, ensure_installed, tree_cpu_seconds
from bench.peer_table import FaultGaps, Ledger, Measured, peer_rows
from mqcluster.client import AdminClient, Message, Producer
from mqcluster.client.consumer import PullConsumer

QUICK = os.environ.get("BENCH_QUICK") == "1"
MSG_SIZE = 1024
LATENCY_SENDS = 50 if QUICK else 300
PHASE_SECONDS = 1.5 if QUICK else 5.0
WINDOW = 64
KILLS = 1 if QUICK else 5
HANGS = 1 if QUICK else 3
PARTS = 1 if QUICK else 3
HOLD_S = 15.0
"""A hang or partition is held at most this long while the producer waits to resume."""
SEND_TIMEOUT_S = 2.0
RESUME_TIMEOUT_S = 45.0
PAYLOAD = random.Random(1).randbytes(MSG_SIZE)
TAIL = PAYLOAD[8:]
FAILOVER_BASE = 1 << 40
"""Ids of the failover phase's messages start here, apart from the throughput phases'."""
FAULTS_BASE = 1 << 41
"""Ids of the hang/partition phase of mqcluster (a second producer) start here."""
PARTITIONS: Partitions | None = None
"""Set by ``run`` when this machine lets the bench cut a node off (else the reason is in
``NO_PARTITIONS``)."""
NO_PARTITIONS = ""

Send = Callable[[], Awaitable[object]]


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * q))]


async def sync_latency(send: Send, n: int) -> tuple[float, float]:
    """p50, p99 in ms of ``n`` sends one at a time."""
    lat = []
    for _ in range(n):
        t0 = time.perf_counter()
        await send()
        lat.append((time.perf_counter() - t0) * 1000)
    lat.sort()
    return percentile(lat, 0.5), percentile(lat, 0.99)


async def pipelined(send: Send, procs: dict[str, Callable[[], float]]) -> tuple[float, int,
                                                                                dict[str, float]]:
    """msgs/s with ``WINDOW`` sends outstanding for ``PHASE_SECONDS``; the count sent;
    CPU us per message of each named process."""
    count = 0
    cpu0 = {k: f() for k, f in procs.items()}
    started = time.perf_counter()
    deadline = started + PHASE_SECONDS

    async def worker() -> None:
        nonlocal count
        while time.perf_counter() < deadline:
            await send()
            count += 1

    await asyncio.gather(*(worker() for _ in range(WINDOW)))
    elapsed = time.perf_counter() - started
    cpu = {k: (f() - cpu0[k]) / max(1, count) * 1e6 for k, f in procs.items()}
    return count / elapsed, count, cpu


class AckedProducer:
    """One-at-a-time sends numbered 0, 1, ...; which were acknowledged and when."""

    def __init__(self, send: Callable[[int], Awaitable[object]],
                 recover: Callable[[], Awaitable[None]]) -> None:
        self.send = send
        self.recover = recover
        self.acked: set[int] = set()
        self.ack_times: list[float] = []
        self.stopped = False
        self.phase = "kill"
        """The fault kind under way (``recover`` may act on it)."""

    async def run(self) -> None:
        seq = 0
        while not self.stopped:
            try:
                await asyncio.wait_for(self.send(seq), SEND_TIMEOUT_S)
                self.acked.add(seq)
                self.ack_times.append(time.monotonic())
            except Exception:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.recover(), SEND_TIMEOUT_S * 2)
                await asyncio.sleep(0.05)
            seq += 1

    async def acks_after(self, t: float, n: int) -> None:
        async with asyncio.timeout(RESUME_TIMEOUT_S):
            while sum(1 for a in self.ack_times if a > t) < n:
                await asyncio.sleep(0.02)

    def gap_around(self, t: float) -> float:
        before = [a for a in self.ack_times if a <= t]
        window = ([before[-1]] if before else [t]) + [a for a in self.ack_times if a > t]
        return max((b - a for a, b in itertools.pairwise(window)), default=0.0)


@dataclass
class Fault:
    """``times`` faults of one ``kind`` on the leader: ``inject`` it, then ``undo`` it
    (restart, wake, heal) and wait until the node serves again."""

    kind: str
    times: int
    inject: Callable[[int], None]
    undo: Callable[[int], Awaitable[None]]


def stop_node(c: NatsCluster | RabbitCluster, i: int, sig: signal.Signals) -> None:
    """``sig`` to node ``i``'s whole process group (RabbitMQ's beam runs under a shell)."""
    p = c.procs[i]
    assert p is not None
    os.killpg(p.pid, sig)


def node_preexec(prefix: str, i: int) -> Callable[[], None]:
    assert PARTITIONS is not None
    return PARTITIONS.preexec(f"{prefix}-{i}")


def dropped_packets() -> int:
    return PARTITIONS.dropped_packets() if PARTITIONS is not None else 0


def count_dropped(gaps: FaultGaps, kind: str, before: int) -> None:
    """A partition's dropped packets into ``gaps`` (its rules are still in place)."""
    if kind == "partition":
        gaps.dropped = (gaps.dropped or 0) + dropped_packets() - before


def cut_node(name: str) -> None:
    assert PARTITIONS is not None
    PARTITIONS.cut(name)


def peer_faults(c: NatsCluster | RabbitCluster, prefix: str,
                restart: Callable[[int], Awaitable[None]],
                ready: Callable[[int], Awaitable[None]]) -> list[Fault]:
    """SIGKILL, SIGSTOP and (where possible) partition of a peer cluster's leader."""
    async def wake(i: int) -> None:
        stop_node(c, i, signal.SIGCONT)
        await ready(i)

    async def heal(i: int) -> None:
        assert PARTITIONS is not None
        PARTITIONS.heal()
        await ready(i)

    faults = [Fault("kill", KILLS, c.kill, restart),
              Fault("hang", HANGS, lambda i: stop_node(c, i, signal.SIGSTOP), wake)]
    if PARTITIONS is not None:
        faults.append(Fault("partition", PARTS, lambda i: cut_node(f"{prefix}-{i}"), heal))
    return faults


async def peer_failover(producer: AckedProducer, leader: Callable[[], Awaitable[int]],
                        faults: list[Fault]) -> dict[str, FaultGaps]:
    """The gaps around each fault, by kind. A kill is undone once sends resumed; a hang
    or a partition once they resumed or ``HOLD_S`` passed (counted as ridden out only
    once healed)."""
    task = asyncio.create_task(producer.run())
    out: dict[str, FaultGaps] = {}
    try:
        await producer.acks_after(0, 20)
        for fault in faults:
            producer.phase = fault.kind
            gaps = out.setdefault(fault.kind, FaultGaps())
            for _ in range(fault.times):
                i = await leader()
                await asyncio.sleep(0.5)
                dropped = dropped_packets()
                fault.inject(i)
                # The fault's time is when it is in place: adding a partition's rules takes
                # tens of ms, in which a fast system acknowledges several sends.
                t = time.monotonic()
                try:
                    async with asyncio.timeout(None if fault.kind == "kill" else HOLD_S):
                        await producer.acks_after(t, 3)
                except TimeoutError:
                    gaps.after_heal += 1
                count_dropped(gaps, fault.kind, dropped)
                await fault.undo(i)
                await producer.acks_after(t, 3)
                gaps.gaps.append(producer.gap_around(t))
                print(f"     {fault.kind} of node {i}: gap {gaps.gaps[-1]:.2f} s", flush=True)
    finally:
        producer.stopped = True
        await task
    return out


def id_of(body: bytes) -> int:
    return int.from_bytes(body[:8], "big")


def numbered(seq: int) -> bytes:
    return seq.to_bytes(8, "big") + TAIL


def counted(send_body: Callable[[bytes], Awaitable[object]], ledger: Ledger,
            ids: Iterator[int] | None = None) -> Send:
    """``send`` of a body with the next id (of ``ids``, shared by the sends to one
    topic; default from 0), the id in ``ledger`` once acknowledged: all the hot path
    adds is a counter and an 8-byte prefix."""
    ids = itertools.count() if ids is None else ids
    acked = ledger.acked

    async def send() -> object:
        seq = next(ids)
        result = await send_body(seq.to_bytes(8, "big") + TAIL)
        acked.add(seq)
        return result

    return send


def server_cpu(pids: list[int]) -> dict[str, Callable[[], float]]:
    """CPU-time readers of each node (with its children) and of this client."""
    procs: dict[str, Callable[[], float]] = {
        f"node{i + 1}": partial(tree_cpu_seconds, p) for i, p in enumerate(pids)}
    procs["client"] = partial(cpu_seconds, [os.getpid()])
    return procs


# ---- RabbitMQ quorum queues (aio-pika) ----

async def measure_rabbit(root: Path) -> Measured:
    m = Measured("RabbitMQ quorum queue")
    try:
        import aio_pika
    except ImportError as e:  # the [bench] extra is not installed: a row says so
        m.error = f"{e}: pip install -e '.[bench]'"
        return m
    await asyncio.to_thread(ensure_installed, "rabbitmq")
    c = RabbitCluster(root / "rabbit")
    if PARTITIONS is not None:
        c.preexec = partial(node_preexec, "rabbit")
    try:
        await c.start()
        urls = [f"amqp://guest:guest@127.0.0.1:{n.amqp_port}/" for n in c.nodes]
        conn = await aio_pika.connect(urls[0])
        ch = await conn.channel(publisher_confirms=True)
        for queue in ("bench", "bench-failover"):
            await ch.declare_queue(queue, durable=True, arguments={
                "x-queue-type": "quorum", "x-quorum-initial-group-size": 3})
        ledger = Ledger()
        persistent = aio_pika.DeliveryMode.PERSISTENT

        async def publish(body: bytes) -> object:
            return await ch.default_exchange.publish(
                aio_pika.Message(body, delivery_mode=persistent), routing_key="bench")

        send = counted(publish, ledger)
        m.p50_ms, m.p99_ms = await sync_latency(send, LATENCY_SENDS)
        procs = server_cpu(c.pids())
        m.pipelined, _, m.cpu_us = await pipelined(send, procs)
        m.drain = await rabbit_drain(conn, "bench", len(ledger.acked), ledger.read)
        await conn.close()

        state: dict[str, aio_pika.abc.AbstractChannel] = {}
        turn = [0]

        async def recover() -> None:
            for _ in range(3):
                turn[0] = (turn[0] + 1) % 3
                if c.procs[turn[0]] is None:
                    continue
                with contextlib.suppress(Exception):
                    cn = await aio_pika.connect(urls[turn[0]], timeout=2)
                    state["ch"] = await cn.channel(publisher_confirms=True)
                    return

        await recover()

        async def send_seq(seq: int) -> object:
            return await state["ch"].default_exchange.publish(
                aio_pika.Message(numbered(FAILOVER_BASE + seq), delivery_mode=persistent),
                routing_key="bench-failover")

        async def leader() -> int:
            return await asyncio.to_thread(c.queue_leader, "bench-failover")

        async def restart(i: int) -> None:
            c.start_node(i)
            await c.wait_node(i)

        producer = AckedProducer(send_seq, recover)
        faults = peer_faults(c, "rabbit", restart, c.wait_node)
        m.set_faults(await peer_failover(producer, leader, faults))
        ledger.ack(FAILOVER_BASE + s for s in producer.acked)
        conn = await connect_any(urls)
        for queue in ("bench", "bench-failover"):  # what the drain left, and the rest
            await rabbit_drain(conn, queue, None, ledger.read)
        await conn.close()
        ledger.settle(m)
    except Exception as e:
        m.error = f"{type(e).__name__}: {e}"[:300]
    finally:
        await asyncio.to_thread(c.close)
    return m


async def connect_any(urls: list[str]) -> Any:
    """A connection to the first node that takes one (one was killed and restarted)."""
    import aio_pika

    error: Exception | None = None
    for url in urls:
        try:
            return await aio_pika.connect(url, timeout=5)
        except Exception as e:
            error = e
    raise RuntimeError(f"no RabbitMQ node takes connections: {error}")


async def rabbit_drain(conn: object, queue: str, expect: int | None,
                       seen: collections.Counter[int] | None) -> float:
    """msgs/s consuming (no-ack, prefetch 1000) until ``expect`` arrived, or until the
    queue is idle for a second when ``expect`` is None; ids go to ``seen``."""
    ch = await conn.channel()  # type: ignore[attr-defined]
    await ch.set_qos(prefetch_count=1000)
    q = await ch.get_queue(queue)
    count = 0
    started = time.perf_counter()
    last = started
    async with q.iterator(no_ack=True) as it:
        while expect is None or count < expect:
            try:
                message = await asyncio.wait_for(it.__anext__(), 1.0 if expect is None else 30)
            except TimeoutError:
                break
            if seen is not None:
                seen[id_of(message.body)] += 1
            count += 1
            last = time.perf_counter()
    await ch.close()
    return count / max(1e-9, last - started)


# ---- NATS JetStream (nats-py) ----

async def measure_nats(root: Path) -> Measured:
    m = Measured("NATS JetStream")
    try:
        import nats
        from nats.js.api import AckPolicy, ConsumerConfig, StorageType
    except ImportError as e:
        m.error = f"{e}: pip install -e '.[bench]'"
        return m
    await asyncio.to_thread(ensure_installed, "nats")
    c = NatsCluster(root / "nats")
    if PARTITIONS is not None:
        c.preexec = partial(node_preexec, "nats")
    try:
        await c.start()
        nc = await nats.connect(servers=c.urls(), max_reconnect_attempts=-1,
                                error_cb=ignore_error,
                                reconnect_time_wait=0.1, connect_timeout=2)
        js = nc.jetstream(timeout=SEND_TIMEOUT_S)
        async with asyncio.timeout(60):
            while True:
                try:
                    await js.add_stream(name="BENCH", subjects=["bench.>"], num_replicas=3,
                                        storage=StorageType.FILE)
                    break
                except Exception:  # JetStream meta leader still being elected
                    await asyncio.sleep(0.5)

        nc = await leader_first(c, nc, "BENCH", max_reconnect_attempts=-1,
                                error_cb=ignore_error, reconnect_time_wait=0.1,
                                connect_timeout=2)
        js = nc.jetstream(timeout=SEND_TIMEOUT_S)
        ledger = Ledger()

        async def publish(body: bytes) -> object:
            return await js.publish("bench.t", body)

        send = counted(publish, ledger)
        m.p50_ms, m.p99_ms = await sync_latency(send, LATENCY_SENDS)
        procs = server_cpu(c.pids())
        m.pipelined, _, m.cpu_us = await pipelined(send, procs)
        cfg = ConsumerConfig(ack_policy=AckPolicy.NONE)
        m.drain = await nats_drain(js, "bench.t", "drain", cfg, len(ledger.acked), None)

        conn = {"nc": nc, "js": js, "turn": 0}

        async def send_seq(seq: int) -> object:
            return await conn["js"].publish("bench.f", numbered(FAILOVER_BASE + seq))

        async def recover() -> None:
            # A killed server closes its connections and nats-py reconnects by itself;
            # a hung or cut-off one does not (its pings come every 2 minutes): move on
            # to the next server after a failed send, as the other clients do.
            if producer.phase == "kill":
                return
            import nats

            conn["turn"] = (conn["turn"] + 1) % 3
            urls = c.urls()
            order = urls[conn["turn"]:] + urls[:conn["turn"]]
            old = conn["nc"]
            conn["nc"] = await nats.connect(servers=order, dont_randomize=True,
                                            max_reconnect_attempts=-1, error_cb=ignore_error,
                                            reconnect_time_wait=0.1, connect_timeout=1)
            conn["js"] = conn["nc"].jetstream(timeout=SEND_TIMEOUT_S)
            asyncio.get_running_loop().create_task(close_quietly(old))

        async def leader() -> int:
            info = await conn["js"].stream_info("BENCH")
            name = info.cluster.leader if info.cluster else None
            return [n.name for n in c.nodes].index(name or "")

        from bench.peer_launchers import wait_port

        async def ready(i: int) -> None:
            await wait_port(c.nodes[i].port, lambda: c.log_tail(i))
            await asyncio.sleep(2)  # let it catch up before the next fault

        async def restart(i: int) -> None:
            c.start_node(i)
            await ready(i)

        producer = AckedProducer(send_seq, recover)
        faults = peer_faults(c, "nats", restart, ready)
        m.set_faults(await peer_failover(producer, leader, faults))
        ledger.ack(FAILOVER_BASE + s for s in producer.acked)
        # A fresh consumer from the start of the stream: everything stored, read once
        # (once JetStream answers again: its meta leader may be re-electing after the
        # faults).
        await settled(lambda: nats_drain(conn["js"], "bench.>", "check", cfg, None,
                                         ledger.read))
        ledger.settle(m)
        await conn["nc"].close()
    except Exception as e:
        m.error = f"{type(e).__name__}: {e}"[:300]
    finally:
        await asyncio.to_thread(c.close)
    return m


async def leader_first(c: NatsCluster, nc: Any, stream: str, **options: Any) -> Any:
    """``nc`` replaced by a connection to the server that leads ``stream`` (the others
    after it, for reconnects): the publisher's best case, as the mqcluster client sends
    to the master itself. A client on another server has its publishes forwarded,
    which costs NATS 5-10% of its rate and makes rounds vary with where it landed."""
    import nats

    info = await nc.jetstream().stream_info(stream)
    names = [n.name for n in c.nodes]
    first = names.index(info.cluster.leader) if info.cluster and info.cluster.leader else 0
    urls = c.urls()
    await nc.close()
    return await nats.connect(servers=[urls[first], *urls[:first], *urls[first + 1:]],
                              dont_randomize=True, **options)


async def settled(call: Callable[[], Awaitable[object]], timeout: float = 60.0) -> None:
    """``call`` retried until it succeeds (a cluster settling after faults)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            await call()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(1)


async def close_quietly(nc: Any) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(nc.close(), 5)


async def ignore_error(e: Exception) -> None:
    """Connections broken by the kills are expected; the producer's gaps measure them."""


async def nats_drain(js: object, subject: str, durable: str, cfg: object, expect: int | None,
                     seen: collections.Counter[int] | None) -> float:
    sub = await js.pull_subscribe(subject, durable=durable, config=cfg)  # type: ignore[attr-defined]
    count = 0
    started = time.perf_counter()
    last = started
    while expect is None or count < expect:
        try:
            msgs = await sub.fetch(256, timeout=1.0 if expect is None else 10)
        except Exception:
            break
        for msg in msgs:
            if seen is not None:
                seen[id_of(msg.data)] += 1
        count += len(msgs)
        last = time.perf_counter()
    await sub.unsubscribe()
    return count / max(1e-9, last - started)


# ---- mqcluster (the existing HA bench groups and helpers) ----

async def mqcluster_faults(g: ha.FaultTarget, proxy_addr: str, prefix: str
                           ) -> tuple[dict[str, FaultGaps], ha.AckClock]:
    """Hangs and partitions of the master, the official client sending through an
    ``mqproxy`` (ids from ``FAULTS_BASE``): the gaps by kind, and what it acknowledged."""
    def heal(_i: int) -> None:
        assert PARTITIONS is not None
        PARTITIONS.heal()

    faults: list[tuple[str, int, Callable[[int], None], Callable[[int], None]]] = [
        ("hang", HANGS, g.hang, g.wake)]
    if PARTITIONS is not None:
        faults.append(("partition", PARTS, lambda i: cut_node(f"{prefix}-{i}"), heal))
    clock = ha.AckClock(proxy_addr, FAULTS_BASE)
    clock.thread.start()
    out: dict[str, FaultGaps] = {}
    try:
        await clock.wait_acks(20)
        for kind, times, inject, undo in faults:
            gaps = out.setdefault(kind, FaultGaps())
            for _ in range(times):
                m = await g.wait_master()
                await g.wait_ready()
                await asyncio.sleep(0.5)
                dropped = dropped_packets()
                inject(m)
                t = time.monotonic()  # once in place (see peer_failover)
                before = len([a for a in clock.acks if a <= t])
                try:
                    await clock.wait_acks(before + 3, timeout=HOLD_S)
                except TimeoutError:
                    gaps.after_heal += 1
                count_dropped(gaps, kind, dropped)
                undo(m)
                await clock.wait_acks(before + 3, timeout=RESUME_TIMEOUT_S)
                gaps.gaps.append(clock.gap_around(t, max(clock.acks)))
                print(f"     {kind} of broker {m}: gap {gaps.gaps[-1]:.2f} s", flush=True)
    finally:
        clock.stop.set()
        await asyncio.to_thread(clock.thread.join, 30)
    return out, clock


async def start_group_proxy(g: object, root: Path) -> Any:
    """An ``mqproxy`` in front of the group: following the controllers, or the name
    server in DLedger mode."""
    from mqcluster_testing.broker.procs import start_proxy
    from mqcluster_testing.ha.cluster import GROUP, ProcessGroup

    if isinstance(g, ProcessGroup):
        return await start_proxy(root, GROUP, controllerAddr=g.controllers.controller_addr)
    namesrv = g.namesrv  # type: ignore[attr-defined]
    return await start_proxy(root, "dledger-a", namesrvAddr=namesrv.addr)


async def measure_mqcluster(system: str, g: ha.FaultTarget, brokers: list[object],
                            leader: int, root: Path) -> Measured:
    m = Measured(system)
    addr = brokers[leader].addr  # type: ignore[attr-defined]
    async with AdminClient(broker_addr=addr) as admin:
        await admin.create_topic(ha.TOPIC, queue_nums=8)
    ledger = Ledger()
    ids = itertools.count()  # one counter for the topic, both producers
    async with Producer(broker_addr=addr, retries=0) as producer:
        async def publish(body: bytes) -> object:
            return await producer.send(Message(ha.TOPIC, body))

        send = counted(publish, ledger, ids)
        m.p50_ms, m.p99_ms = await sync_latency(send, LATENCY_SENDS)
        procs = mqcluster_cpu(brokers, leader)
        m.pipelined, _, m.cpu_us = await pipelined(send, procs)
    async with Producer(broker_addr=addr, retries=0, auto_batch=True) as batching:
        async def publish_auto_batched(body: bytes) -> object:
            return await batching.send(Message(ha.TOPIC, body))

        m.pipelined_auto_batch, _, m.cpu_us_auto_batch = await pipelined(
            counted(publish_auto_batched, ledger, ids), procs)
    async with PullConsumer("bench-drain", broker_addr=addr) as consumer:
        count = 0
        started = time.perf_counter()
        while count < len(ledger.acked):
            got = await consumer.receive(ha.TOPIC, 32)
            if not got:
                break
            count += len(got)
        m.drain = count / (time.perf_counter() - started)
    ha.KILLS, ha.HANGS = KILLS, 0
    kills, _, clock = await ha.failover_clocked(g, first_id=FAILOVER_BASE)
    m.failover = kills
    ledger.ack(clock.acked_ids)
    proxy = await start_group_proxy(g, root)
    try:
        faults, fault_clock = await mqcluster_faults(g, proxy.addr, root.name)
    finally:
        await proxy.kill()
    m.set_faults(faults)
    ledger.ack(fault_clock.acked_ids)
    new = brokers[await g.wait_master()].addr  # type: ignore[attr-defined]
    # A fresh consumer group from the start of every queue on the final master.
    await read_topic(new, ledger.read)
    ledger.settle(m)
    return m


async def read_topic(addr: str, seen: collections.Counter[int]) -> None:
    """Every message of ``ha.TOPIC`` on ``addr``, from offset 0, ids into ``seen``."""
    async with PullConsumer("bench-check", broker_addr=addr) as consumer:
        while got := await consumer.receive(ha.TOPIC, 256):
            for msg in got:
                seen[id_of(msg.body)] += 1


def mqcluster_cpu(brokers: list[object], leader: int) -> dict[str, Callable[[], float]]:
    """CPU-time readers of the leader, each other replica and this client."""
    pids = [b.proc.pid for b in brokers]  # type: ignore[attr-defined]
    order = [leader] + [i for i in range(len(pids)) if i != leader]
    procs: dict[str, Callable[[], float]] = {
        ("leader" if i == leader else f"replica{i + 1}"): partial(cpu_seconds, [pids[i]])
        for i in order}
    procs["client"] = partial(cpu_seconds, [os.getpid()])
    return procs


Group = tuple[ha.FaultTarget, list[object], int]
"""A running mqcluster group, its brokers and the index of its leader."""
StartGroup = Callable[[Path], contextlib.AbstractAsyncContextManager[Group]]


def cgroups_for(root: Path, replica_dir: str) -> None:
    """Each broker of the group at ``root`` (its files under ``<root>/<replica_dir><i>/``)
    joins cgroup ``<root name>-<i>`` as it starts, when the bench can partition."""
    if PARTITIONS is not None:
        for i in range(3):
            PARTITIONS.python_child(f"{root.name}-{i}", f"{root / f'{replica_dir}{i}'}/broker-")


@contextlib.asynccontextmanager
async def controller_group(root: Path) -> AsyncIterator[Group]:
    """A controller-mode group of 3, its SyncStateSet whole and its master ready."""
    from mqcluster_testing.ha.cluster import ProcessGroup

    cgroups_for(root, "b")
    g = ProcessGroup(root, detection="shipped")
    try:
        await g.start()
        await g.wait_sync_state_set(3)
        leader = await g.wait_master()
        await g.wait_ready()
        yield g, list(g.brokers), leader
    finally:
        await g.close()


@contextlib.asynccontextmanager
async def dledger_group(root: Path) -> AsyncIterator[Group]:
    """A DLedger group of 3 with a leader and every follower caught up."""
    from mqcluster_testing.ha.dledger_cluster import DLedgerProcessGroup

    cgroups_for(root, "n")
    g = DLedgerProcessGroup(root)
    try:
        await g.start()
        leader = await g.wait_leader()
        await g.wait_caught_up()
        yield g, list(g.brokers), leader
    finally:
        await g.close()


async def measure_group(system: str, start: StartGroup, root: Path) -> Measured:
    try:
        async with start(root) as (g, brokers, leader):
            return await measure_mqcluster(system, g, brokers, leader, root)
    except Exception as e:
        return Measured(system, error=f"{type(e).__name__}: {e}"[:300])


async def measure_controller(root: Path) -> Measured:
    return await measure_group("mqcluster controller", controller_group, root / "controller")


async def measure_dledger(root: Path) -> Measured:
    return await measure_group("mqcluster dledger", dledger_group, root / "dledger")


async def _run(root: Path) -> list[Row]:
    results = []
    for measure in (measure_controller, measure_dledger, measure_rabbit, measure_nats):
        started = time.monotonic()
        results.append(await measure(root))
        print(f"   {results[-1].system}: {time.monotonic() - started:.0f} s"
              + (f" ({results[-1].error})" if results[-1].error else ""), flush=True)
    from bench.peer_rounds import measure_rounds

    started = time.monotonic()
    rounds = await measure_rounds(root)
    print(f"   alternating rounds: {time.monotonic() - started:.0f} s", flush=True)
    return peer_rows(results) + rounds


def run() -> list[Row]:
    global PARTITIONS, NO_PARTITIONS
    # The clients log every connection a SIGKILL breaks; those breaks are the point here.
    for name in ("aiormq", "aio_pika", "nats"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        NO_PARTITIONS = unavailable() or ""
        if not NO_PARTITIONS:
            with contextlib.suppress(Exception):  # a missing package gets its own row
                for kind in ("rabbitmq", "nats"):  # installed before the network goes
                    ensure_installed(kind)
            PARTITIONS = Partitions()
            try:
                PARTITIONS.enter(Path(tmp))
            except Exception as e:
                NO_PARTITIONS = f"{type(e).__name__}: {e}"[:200]
                PARTITIONS.close()
                PARTITIONS = None
        try:
            rows = asyncio.run(_run(Path(tmp)))
        finally:
            if PARTITIONS is not None:
                PARTITIONS.close()
                PARTITIONS = None
        if NO_PARTITIONS:
            rows.append(Row("peers", "partition rows: not measured", None, note=NO_PARTITIONS))
        return rows
