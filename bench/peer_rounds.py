"""Pipelined publish of mqcluster (both modes) and NATS JetStream, the fastest peer,
in alternating rounds while all three run at once.

The sequential peers measurements run each system minutes apart, and this machine's
speed drifts by tens of percent over minutes; a phase of each system in every round,
a few seconds apart, in a rotating order, gives ratios that drift cancels out of.
The rows report the median rate of each system over the rounds and each round's ratio.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import bench.ha_bench as ha
import bench.peers_bench as pb
from bench import Row
from bench.peer_launchers import NatsCluster, ensure_installed
from bench.peer_table import NAME, ratio
from mqcluster.client import AdminClient, Message, Producer

ROUNDS = 1 if pb.QUICK else 5
"""Alternating rounds per system: the machine is shared, and one slow stretch moves a
median of three."""
BASELINE = "NATS JetStream"

Procs = dict[str, Callable[[], float]]


@dataclass
class Contender:
    system: str
    send: Callable[[], Awaitable[object]]
    procs: Procs
    rates: list[float] = field(default_factory=list)
    cpu_us: list[dict[str, float]] = field(default_factory=list)


def rotated(items: list[Contender], k: int) -> list[Contender]:
    """Round ``k``'s order: over as many rounds as systems, each goes first, in the
    middle and last once (a Latin square)."""
    k %= len(items)
    return items[k:] + items[:k]


def round_rows(contenders: list[Contender], baseline: str = BASELINE) -> list[Row]:
    """Median rate per system; ours carry each round's ratio to the baseline. Pure."""
    base = next((c for c in contenders if c.system == baseline), None)
    rows = []
    for c in contenders:
        if not c.rates:
            continue
        note = f"rounds: {', '.join(f'{r:,.0f}' for r in c.rates)}"
        if base is not None and c is not base and len(base.rates) == len(c.rates):
            per_round = ", ".join(ratio(o, b) for o, b in zip(c.rates, base.rates, strict=True))
            note += (f"; /{baseline} per round: {per_round}; median ratio "
                     f"{ratio(statistics.median(c.rates), statistics.median(base.rates))}")
        if c.cpu_us:
            cpu = {k: statistics.median(d[k] for d in c.cpu_us) for k in c.cpu_us[0]}
            note += "; CPU us/msg: " + ", ".join(f"{k} {v:.0f}" for k, v in cpu.items())
        rows.append(Row(NAME, f"{c.system}: pipelined publish, alternating rounds (median)",
                        statistics.median(c.rates), "msgs/s", note=note))
    return rows


@contextlib.asynccontextmanager
async def nats_contender(root: Path) -> AsyncIterator[Contender]:
    import nats

    await asyncio.to_thread(ensure_installed, "nats")
    c = NatsCluster(root / "nats-rounds")
    try:
        await c.start()
        nc = await nats.connect(servers=c.urls(), connect_timeout=2)
        js = nc.jetstream(timeout=pb.SEND_TIMEOUT_S)
        async with asyncio.timeout(60):
            while True:
                try:
                    await js.add_stream(name="ROUNDS", subjects=["rounds.>"], num_replicas=3)
                    break
                except Exception:  # JetStream meta leader still being elected
                    await asyncio.sleep(0.5)

        nc = await pb.leader_first(c, nc, "ROUNDS", connect_timeout=2)
        js = nc.jetstream(timeout=pb.SEND_TIMEOUT_S)

        async def send() -> object:
            return await js.publish("rounds.t", pb.PAYLOAD)

        await pb.sync_latency(send, 50)  # connections and stream leader settled
        try:
            yield Contender(BASELINE, send, pb.server_cpu(c.pids()))
        finally:
            await nc.close()
    finally:
        await asyncio.to_thread(c.close)


@contextlib.asynccontextmanager
async def mqcluster_contender(system: str, start: pb.StartGroup,
                              root: Path) -> AsyncIterator[Contender]:
    async with start(root) as (_, brokers, leader):
        addr = brokers[leader].addr  # type: ignore[attr-defined]
        async with AdminClient(broker_addr=addr) as admin:
            await admin.create_topic(ha.TOPIC, queue_nums=8)
        async with Producer(broker_addr=addr, retries=0) as producer:
            async def send() -> object:
                return await producer.send(Message(ha.TOPIC, pb.PAYLOAD))

            await pb.sync_latency(send, 50)
            yield Contender(system, send, pb.mqcluster_cpu(brokers, leader))


def controller_contender(root: Path) -> contextlib.AbstractAsyncContextManager[Contender]:
    return mqcluster_contender("mqcluster controller", pb.controller_group,
                               root / "controller-rounds")


def dledger_contender(root: Path) -> contextlib.AbstractAsyncContextManager[Contender]:
    return mqcluster_contender("mqcluster dledger", pb.dledger_group, root / "dledger-rounds")


async def measure_rounds(root: Path) -> list[Row]:
    async with contextlib.AsyncExitStack() as stack:
        try:
            contenders = [await stack.enter_async_context(start(root)) for start in
                          (controller_contender, dledger_contender, nats_contender)]
        except Exception as e:
            return [Row(NAME, "pipelined publish, alternating rounds: not measured", None,
                        note=f"{type(e).__name__}: {e}"[:300])]
        for k in range(ROUNDS):
            for c in rotated(contenders, k):
                rate, _, cpu = await pb.pipelined(c.send, c.procs)
                c.rates.append(rate)
                c.cpu_us.append(cpu)
        return round_rows(contenders)
