"""``python -m chaos fuzz``: hostile frames at every listener of a running group.

Each scenario (a controller-mode group and a DLedger group, as ``make chaos`` runs them,
every process on its own namespace host) runs the usual workload: the official client
produces FIFO messages and an orderly consumer reads them. Meanwhile one fault kind,
``fuzz``, finds every TCP listener of every process (``ss`` in each namespace) and sends
each one ``--frames`` payloads of its kind from ``chaos.frames`` (remoting frames to the
name server, broker, controller and Raft ports, HA layouts to the HA port, protobuf
bytes to every gRPC method, HTTP to the metrics port), from the bridge address, which is
no member of the group. Then it counts the processes that died or logged an escaped
exception, restarts the dead ones, and checks that consensus still works: the master is
SIGKILLed and another must be elected (in controller mode the active controller too).
The scenario's verdict is the chaos suite's: nothing acknowledged lost, nothing stored
twice, FIFO order kept, replicas identical.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from google.protobuf import descriptor as pb_descriptor
from google.protobuf import message_factory
from google.protobuf.message import Message as PbMessage

from chaos.cluster import BROKER_PORTS, NAMESRV_PORT, ChaosCluster
from chaos.controller_mode import CONTROLLER_PORT, ControllerCluster
from chaos.dledger_mode import DLEDGER_PORT
from chaos.faults import Fault, kill_controller, kill_master
from chaos.frames import FrameFuzzer
from chaos.netns import probe
from chaos.process import HostProcess
from chaos.runner import ScenarioResult, run_scenario, say
from chaos.table import aligned

REMOTING_PORTS = {NAMESRV_PORT, CONTROLLER_PORT, DLEDGER_PORT, BROKER_PORTS["listenPort"]}
KIND_BY_PORT = {**dict.fromkeys(REMOTING_PORTS, "remoting"),
                BROKER_PORTS["haListenPort"]: "ha", BROKER_PORTS["grpcServerPort"]: "grpc"}
# What a log line of a process that lost control looks like.
CRASH_MARKERS = ("Traceback (most recent call last)", "Task exception was never retrieved",
                 "raft driver failed", "stopping this member", "Fatal error")
SERVICE = "apache.rocketmq.v2.MessagingService"
FRAMES_PER_CONNECTION = (1, 20)
CONNECT_TIMEOUT = 2.0
LISTENER_TIMEOUT = 120.0


@dataclass
class ListenerStats:
    process: str
    address: str
    kind: str
    sent: int = 0
    connections: int = 0
    closed_by_server: int = 0
    refused: int = 0
    answers: Counter[str] = field(default_factory=Counter)


@dataclass
class FuzzReport:
    listeners: list[ListenerStats] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)
    elections: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------- listeners


def listeners(cluster: ChaosCluster) -> list[tuple[HostProcess, str, int]]:
    """Every TCP listener of every process reachable from outside its host: ``ss`` in
    each namespace, so a port nobody thought of is fuzzed too."""
    procs = [p for p in (cluster.namesrv, *cluster.controllers, *cluster.brokers) if p]
    found = []
    for p in procs:
        out = subprocess.run(p.host.command(["ss", "-Hltn"]), capture_output=True,
                             text=True, check=True).stdout
        for line in out.splitlines():
            local = line.split()[3]
            host, _, port = local.rpartition(":")
            if host.startswith("127.") or host == "[::1]":
                continue  # loopback only: nobody else on the network reaches it
            found.append((p, p.host.address, int(port)))
    return sorted(set(found), key=lambda t: (t[0].name, t[2]))


def kind_of(port: int) -> str:
    return KIND_BY_PORT.get(port, "http")


# ---------------------------------------------------------------------- senders


async def _drain(reader: asyncio.StreamReader, stats: ListenerStats) -> None:
    with contextlib.suppress(Exception):
        while data := await reader.read(65536):
            stats.answers["bytes"] += len(data)
    stats.closed_by_server += 1


async def fuzz_stream(stats: ListenerStats, port: int, frames: int,
                      make: Callable[[], bytes], rng: random.Random) -> None:
    """``frames`` payloads over fresh connections of a few payloads each."""
    while stats.sent < frames:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(stats.address, port), CONNECT_TIMEOUT)
        except (OSError, TimeoutError):
            stats.refused += 1
            if stats.refused > 20:
                return
            await asyncio.sleep(0.1)
            continue
        stats.connections += 1
        drain = asyncio.create_task(_drain(reader, stats))
        try:
            for _ in range(rng.randint(*FRAMES_PER_CONNECTION)):
                if drain.done() or stats.sent >= frames:
                    break
                writer.write(make())
                stats.sent += 1
                await asyncio.wait_for(writer.drain(), 5)
        except (OSError, TimeoutError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(drain, 1)
            drain.cancel()


def _fill(msg: PbMessage, rng: random.Random, depth: int = 0) -> None:
    """Random values in a protobuf message's fields (names that exist nowhere)."""
    for f in msg.DESCRIPTOR.fields:
        if rng.random() < 0.3:
            continue
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            key_field, value_field = f.message_type.fields
            if value_field.message_type is None:
                getattr(msg, f.name)[_scalar(key_field, rng)] = _scalar(value_field, rng)
            continue
        for _ in range(rng.randint(0, 2) if f.is_repeated else 1):
            if f.message_type is not None:
                if depth >= 3:
                    break
                child = getattr(msg, f.name).add() if f.is_repeated else getattr(msg, f.name)
                _fill(child, rng, depth + 1)
                child.SetInParent()
                continue
            value = _scalar(f, rng)
            if f.is_repeated:
                getattr(msg, f.name).append(value)
            else:
                setattr(msg, f.name, value)


def _scalar(f: pb_descriptor.FieldDescriptor, rng: random.Random) -> object:
    t = pb_descriptor.FieldDescriptor
    if f.type == t.TYPE_STRING:
        return rng.choice(("", "fuzz-" + rng.randbytes(4).hex(), "\x01KEYS\x02x", "a" * 300,
                           "%TOPIC%", "../x"))
    if f.type == t.TYPE_BYTES:
        return rng.randbytes(rng.choice((0, 8, 1000)))
    if f.type == t.TYPE_BOOL:
        return rng.random() < 0.5
    if f.type == t.TYPE_ENUM:
        return rng.choice([v.number for v in f.enum_type.values])
    if f.type in (t.TYPE_DOUBLE, t.TYPE_FLOAT):
        return rng.choice((0.0, -1.0, 1e300))
    signed = f.type in (t.TYPE_INT32, t.TYPE_SINT32, t.TYPE_SFIXED32, t.TYPE_INT64,
                        t.TYPE_SINT64, t.TYPE_SFIXED64)
    bits = 32 if f.type in (t.TYPE_INT32, t.TYPE_SINT32, t.TYPE_SFIXED32, t.TYPE_UINT32,
                            t.TYPE_FIXED32) else 64
    low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    return rng.choice((low, high, 0, -1 if signed else 1, rng.randint(low, high)))


def grpc_methods() -> list[tuple[str, pb_descriptor.MethodDescriptor]]:
    from rocketmq.grpc_protocol import service_pb2

    service = service_pb2.DESCRIPTOR.services_by_name["MessagingService"]
    return [(f"/{SERVICE}/{m.name}", m) for m in service.methods]


async def fuzz_grpc(stats: ListenerStats, port: int, frames: int,
                    fuzzer: FrameFuzzer, rng: random.Random) -> None:
    methods = grpc_methods()
    async with grpc.aio.insecure_channel(f"{stats.address}:{port}") as channel:
        stats.connections += 1

        async def one() -> None:
            path, method = rng.choice(methods)
            valid = message_factory.GetMessageClass(method.input_type)()
            _fill(valid, rng)
            payloads = [fuzzer.grpc_payload(valid.SerializeToString())
                        for _ in range(rng.randint(1, 3))]
            try:
                if method.client_streaming:
                    call = channel.stream_stream(path)(iter(payloads), timeout=2)
                    async for _ in call:
                        pass
                elif method.server_streaming:
                    async for _ in channel.unary_stream(path)(payloads[0], timeout=2):
                        pass
                else:
                    await channel.unary_unary(path)(payloads[0], timeout=2)
                stats.answers["OK"] += 1
            except grpc.aio.AioRpcError as exc:
                stats.answers[exc.code().name] += 1

        while stats.sent < frames:
            batch = min(16, frames - stats.sent)
            stats.sent += batch
            await asyncio.gather(*(one() for _ in range(batch)))
            if stats.answers["UNAVAILABLE"] > 50:
                return


async def fuzz_listener(proc: HostProcess, address: str, port: int, frames: int,
                        rng: random.Random) -> ListenerStats:
    kind = kind_of(port)
    stats = ListenerStats(proc.name, address, kind)
    fuzzer = FrameFuzzer(rng)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(LISTENER_TIMEOUT):
            if kind == "grpc":
                await fuzz_grpc(stats, port, frames, fuzzer, rng)
            else:
                make = {"remoting": fuzzer.remoting, "ha": fuzzer.ha,
                        "http": fuzzer.http}[kind]
                await fuzz_stream(stats, port, frames, make, rng)
    stats.address = f"{address}:{port}"
    return stats


# ---------------------------------------------------------------------- the fault


def _log_sizes(procs: list[HostProcess]) -> dict[str, int]:
    return {p.name: p.log_path.stat().st_size if p.log_path.exists() else 0 for p in procs}


def _new_log_lines(p: HostProcess, since: int) -> list[str]:
    with p.log_path.open("rb") as f:
        f.seek(since)
        return f.read().decode(errors="replace").splitlines()


def fuzz_fault(frames: int, report: FuzzReport) -> Fault:
    async def inject(c: ChaosCluster, rng: random.Random) -> str:
        procs = [p for p in (c.namesrv, *c.controllers, *c.brokers) if p]
        sizes = _log_sizes(procs)
        targets = listeners(c)
        rng.shuffle(targets)
        started = time.monotonic()
        for proc, address, port in targets:
            stats = await fuzz_listener(proc, address, port, frames, rng)
            report.listeners.append(stats)
        sent = sum(s.sent for s in report.listeners)
        for p in procs:
            lines = [line for line in _new_log_lines(p, sizes[p.name])
                     if any(m in line for m in CRASH_MARKERS)]
            if not p.alive:
                report.crashes.append(f"{p.name} exited: {p.log_tail(5)}")
                await p.start()
            elif lines:
                report.crashes.append(f"{p.name}: {lines[0].strip()[:200]}")
        report.elections.append(await kill_master(c, rng))
        if isinstance(c, ControllerCluster):
            report.elections.append(await kill_controller(c, rng))
        return (f"fuzz: {sent} payloads to {len(targets)} listeners in "
                f"{time.monotonic() - started:.0f} s, {len(report.crashes)} crashes; "
                + "; ".join(report.elections))
    return Fault("fuzz", inject)


# ---------------------------------------------------------------------- table


def render(results: list[tuple[ScenarioResult, FuzzReport]]) -> str:
    head = ("scenario", "process", "listener", "kind", "payloads", "conns", "closed",
            "refused", "answers")
    rows: list[tuple[str, ...]] = []
    for result, report in results:
        for s in report.listeners:
            answers = ", ".join(f"{k} {v}" for k, v in s.answers.most_common(4))
            rows.append((result.scenario, s.process, s.address, s.kind, str(s.sent),
                         str(s.connections), str(s.closed_by_server), str(s.refused),
                         answers))
    out = aligned(head, rows)
    out.append("")
    for result, report in results:
        v = result.verdict
        out.append(f"{result.scenario}: listeners {len(report.listeners)}, payloads "
                   f"{sum(s.sent for s in report.listeners)}, crashes {len(report.crashes)}")
        out.extend(f"{result.scenario}:   crash: {c}" for c in report.crashes)
        out.extend(f"{result.scenario}: after the fuzz: {e}" for e in report.elections)
        if v is None:
            out.append(f"{result.scenario}: error: {result.error}")
            continue
        out.append(f"{result.scenario}: acknowledged {v.acknowledged}, lost {len(v.lost)}, "
                   f"duplicated {len(v.duplicated)}, reordered {len(v.reordered)}, "
                   f"unconsumed {len(v.unconsumed)}, replicas {v.replicas_detail}")
    return "\n".join(out)


def ok(result: ScenarioResult, report: FuzzReport) -> bool:
    return (result.ok and not report.crashes and bool(report.listeners)
            and all("NO new master" not in e for e in report.elections))


# ---------------------------------------------------------------------- main


async def run_fuzz(mode: str, frames: int, seed: int,
                   workdir: Path) -> tuple[ScenarioResult, FuzzReport]:
    report = FuzzReport()
    result = await run_scenario(mode, 0.0, seed, workdir, faults=[fuzz_fault(frames, report)])
    return result, report


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m chaos fuzz", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frames", type=int, default=2000, help="payloads per listener")
    p.add_argument("--seed", type=int, help="reproduce a run (default: random, printed)")
    p.add_argument("--scenarios", default="controller,dledger")
    p.add_argument("--workdir", type=Path, help="keep stores, logs and histories here")
    a = p.parse_args(argv)
    reason = probe()
    if reason is not None:
        print(f"chaos fuzz: cannot run: {reason} (needs root for `ip netns`)", file=sys.stderr)
        return 2
    seed = a.seed if a.seed is not None else secrets.randbelow(1_000_000)
    workdir = a.workdir or Path(tempfile.mkdtemp(prefix="mqfuzz-"))
    say(f"fuzz seed {seed} (reproduce with --seed {seed}); files in {workdir}")

    async def run_all() -> list[tuple[ScenarioResult, FuzzReport]]:
        return [await run_fuzz(mode, a.frames, seed + i, workdir / mode)
                for i, mode in enumerate(a.scenarios.split(","))]

    results = asyncio.run(run_all())
    print()
    print(render(results))
    good = all(ok(r, rep) for r, rep in results)
    if good and a.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    elif not good:
        print(f"stores, logs and histories kept in {workdir}")
    return 0 if good else 1
