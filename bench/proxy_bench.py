"""The proxy tier: how long a client waits through failures, and what the proxy costs.

* Pauses: the official client sends one message at a time through two cluster-mode
  ``mqproxy`` processes (its endpoints name both, as a client given a Service's
  endpoints does) in front of a 3-replica controller-mode group with the shipped
  failure detection. The master is SIGSTOPped (``PROXY_BENCH_HANGS``, default 3; the
  same as a partition to a client: TCP open, nobody answering), SIGKILLed
  (``PROXY_BENCH_KILLS``, default 3) and a proxy SIGKILLed (each proxy once per
  round). The figure is the longest gap between two acknowledged sends around each
  fault; afterwards every acknowledged message is read back by id.
* Cost: batches of 1 KiB messages (``BATCH`` per SendMessage, ``SENDERS`` concurrent)
  over raw gRPC to the group's master directly and through one proxy, alternating
  phases in the same run; messages/s and CPU microseconds per message of every
  process (client, proxy, each broker).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
from google.protobuf.timestamp_pb2 import Timestamp
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from bench import Row, cpu_seconds
from bench.ha_bench import MSG_SIZE, TOPIC, AckClock, before_fault
from mqcluster.client import AdminClient
from mqcluster_testing.broker.procs import ProxyProc, free_ip, free_port
from mqcluster_testing.ha.cluster import ProcessGroup

NAME = "proxy"
QUICK = os.environ.get("BENCH_QUICK") == "1"
HANGS = int(os.environ.get("PROXY_BENCH_HANGS", "1" if QUICK else "3"))
KILLS = int(os.environ.get("PROXY_BENCH_KILLS", "1" if QUICK else "3"))
PROXY_KILLS = int(os.environ.get("PROXY_BENCH_PROXY_KILLS", "1" if QUICK else "2"))
ROUNDS = int(os.environ.get("PROXY_BENCH_ROUNDS", "1" if QUICK else "3"))
BATCH = 16
SENDERS = 32
PHASE_SECONDS = 4.0
HANG_TARGET_S = 3.0
KILL_TARGET_S = 0.5
SEND = "/apache.rocketmq.v2.MessagingService/SendMessage"


async def start_proxy(root: Path, g: ProcessGroup) -> ProxyProc:
    """A cluster-mode proxy (every group; here the one) with the shipped settings."""
    assert g.namesrv is not None
    ip = free_ip()
    port = free_port(ip)
    conf = root / f"proxy-{ip}-{port}.conf"
    conf.write_text(f"bindAddress={ip}\ngrpcServerPort={port}\n"
                    f"controllerAddr={g.controllers.controller_addr}\n"
                    f"namesrvAddr={g.namesrv.addr}\n")
    proxy = ProxyProc("mqproxy", [sys.executable, "-m", "mqcluster.proxy.main",
                                  "-c", str(conf)], root / f"proxy-{port}.log",
                      addr=f"{ip}:{port}")
    await proxy.start("boot success")
    return proxy


# ---- cost


def request(payload: bytes) -> bytes:
    now = Timestamp()
    now.GetCurrentTime()
    msgs = []
    for _ in range(BATCH):
        m = pb.Message(topic=pb.Resource(name=TOPIC), body=payload)
        sp = m.system_properties
        sp.message_id = os.urandom(16).hex().upper()
        sp.born_timestamp.CopyFrom(now)
        sp.born_host = "bench"
        sp.body_encoding = pb.Encoding.IDENTITY
        sp.message_type = pb.MessageType.NORMAL
        msgs.append(m)
    out: bytes = spb.SendMessageRequest(messages=msgs).SerializeToString()
    return out


@dataclass(frozen=True)
class Phase:
    rate: float
    per_msg: list[float]


async def phase(endpoint: str, pids: list[int]) -> Phase:
    payload = random.randbytes(MSG_SIZE)
    count = 0
    async with grpc.aio.insecure_channel(endpoint) as channel:
        send = channel.unary_unary(SEND)
        await send(request(payload), timeout=10)  # connected before the clock starts
        cpu0 = [cpu_seconds([p]) for p in pids]
        started = time.perf_counter()
        deadline = started + PHASE_SECONDS

        async def loop() -> None:
            nonlocal count
            body = request(payload)
            while time.perf_counter() < deadline:
                raw = await send(body, timeout=10)
                resp = spb.SendMessageResponse.FromString(raw)
                if resp.status.code == pb.Code.OK:
                    count += BATCH
        await asyncio.gather(*(loop() for _ in range(SENDERS)))
        elapsed = time.perf_counter() - started
        used = [cpu_seconds([p]) - c for p, c in zip(pids, cpu0, strict=True)]
    return Phase(count / elapsed, [u / max(1, count) for u in used])


def median(phases: list[Phase]) -> Phase:
    return Phase(statistics.median(p.rate for p in phases),
                 [statistics.median(x) for x in zip(*(p.per_msg for p in phases), strict=True)])


def micro(values: list[float]) -> str:
    return ", ".join(f"{v * 1e6:.0f}" for v in values)


async def cost_rows(g: ProcessGroup, proxy: ProxyProc) -> list[Row]:
    m = await g.wait_master()
    master_grpc = f"{g.brokers[m].ip}:{g.brokers[m].props['grpcServerPort']}"
    brokers = [g.brokers[m]] + [b for i, b in enumerate(g.brokers) if i != m]
    broker_pids = [b.proc.pid for b in brokers if b.proc is not None]
    assert proxy.proc is not None
    direct: list[Phase] = []
    proxied: list[Phase] = []
    for k in range(ROUNDS):
        for side in (("direct", "proxy") if k % 2 == 0 else ("proxy", "direct")):
            if side == "direct":
                direct.append(await phase(master_grpc, [os.getpid(), *broker_pids]))
            else:
                proxied.append(await phase(proxy.addr,
                                           [os.getpid(), proxy.proc.pid, *broker_pids]))
    d, p = median(direct), median(proxied)
    return [
        Row(NAME, f"direct to the master, batches of {BATCH} x 1 KiB over gRPC", d.rate,
            "msgs/s", note=f"median of {ROUNDS} phases alternating with the proxy's; CPU "
                           f"us/msg: client, master, slave, slave = {micro(d.per_msg)}"),
        Row(NAME, "same through one mqproxy", p.rate, "msgs/s", ">= 0.7 x direct", d.rate,
            note=f"CPU us/msg: client, proxy, master, slave, slave = {micro(p.per_msg)}; "
                 f"every process {sum(p.per_msg) * 1e6:.0f} vs {sum(d.per_msg) * 1e6:.0f} "
                 f"direct"),
        Row(NAME, "  CPU per message through the proxy / direct (every process)",
            sum(p.per_msg) / sum(d.per_msg), "", "",
            note="the proxy's own work per message, relative; a CPU-bound machine "
                 "reaches direct rate / this"),
    ]


# ---- pauses


async def pause_rows(root: Path, g: ProcessGroup, proxies: list[ProxyProc]) -> list[Row]:
    clock = AckClock(";".join(p.addr for p in proxies))
    clock.thread.start()
    hangs: list[float] = []
    kills: list[float] = []
    proxy_kills: list[float] = []
    rng = random.Random(11)
    try:
        await clock.wait_acks(20)
        for _ in range(HANGS):
            m, t = await before_fault(g, rng)
            g.hang(m)
            await g.wait_master(not_index=m)
            await clock.wait_acks_after(t, 20)
            hangs.append(clock.gap_since(t))
            g.wake(m)
        for _ in range(KILLS):
            m, t = await before_fault(g, rng)
            await g.kill(m)
            await clock.wait_acks_after(t, 20)
            kills.append(clock.gap_since(t))
            await g.restart(m)
        for _ in range(PROXY_KILLS):
            for proxy in proxies:
                await asyncio.sleep(rng.uniform(0.2, 0.6))
                t = time.monotonic()
                await proxy.kill()
                await clock.wait_acks_after(t, 20)
                proxy_kills.append(clock.gap_since(t))
                await proxy.start("boot success")
    finally:
        clock.stop.set()
        await asyncio.to_thread(clock.thread.join, 30)
    lost = await unread(g, set(clock.acked_ids))
    via = f"official client, endpoints = {len(proxies)} proxies; shipped failure detection"

    def row(what: str, gaps: list[float], target: float) -> Row:
        return Row(NAME, f"longest pause, {what} (max)", max(gaps), "s", f"< {target} s",
                   note=f"median {statistics.median(gaps):.2f} s over {len(gaps)}; {via}; "
                        f"failed sends {clock.failures}; acknowledged {len(clock.acked_ids)}, "
                        f"lost {lost}")

    return [row("master SIGSTOP", hangs, HANG_TARGET_S),
            row("master SIGKILL", kills, KILL_TARGET_S),
            row("proxy replica SIGKILL", proxy_kills, KILL_TARGET_S)]


async def unread(g: ProcessGroup, acked: set[int]) -> int:
    """Acknowledged ids not in the master's store (read back by the body's id)."""
    await g.wait_ready()
    m = await g.wait_master()
    stored = {int.from_bytes(msg.body[:8], "big") for msg in g.messages(m)
              if msg.topic == TOPIC and len(msg.body) == MSG_SIZE}
    return len(acked - stored)


async def _run(root: Path) -> list[Row]:
    g = ProcessGroup(root / "group", detection="shipped")
    proxies: list[ProxyProc] = []
    try:
        await g.start()
        await g.wait_sync_state_set(3)
        m = await g.wait_master()
        async with AdminClient(broker_addr=g.brokers[m].addr) as admin:
            await admin.create_topic(TOPIC, queue_nums=8)
        proxies = [await start_proxy(root, g) for _ in range(2)]
        rows = await cost_rows(g, proxies[0])
        rows += await pause_rows(root, g, proxies)
        return rows
    except BaseException:
        print(g.logs())
        raise
    finally:
        for proxy in proxies:
            with contextlib.suppress(Exception):
                await proxy.kill()
        await g.close()


def run() -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="proxy-bench-") as tmp:
        return asyncio.run(_run(Path(tmp)))
