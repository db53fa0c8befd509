"""Operator benchmark: one operator following 100 BrokerGroups.

Processes: ``mqcontroller`` x 3 (real, Raft), one process hosting 200 stand-in
brokers (``StandInBroker``: they register and heartbeat through the real
controller API; a master and an in-sync slave per group, on 127.1.<g>.1-2),
the operator as its own process (``kopf.operator`` with the production
handlers and intervals, the real ``RemotingControllerProbe``), and this
process, which hosts the Kubernetes API emulator and measures.

Masters are killed (their stand-in closes every connection, so the active
controller elects the in-sync slave at once): one by one, in batches of 10,
and 50 at once; then the dead masters come back as slaves and the round is
repeated in the other direction. Measured per failover, from the moment the
active controller applied ElectMaster (``applied_wall_ms`` of its election
record, read from every controller's ``/health``) to the moment the emulator
stored the pod labels that make the client Service select the new master (new
pod ``role=master`` and the old one not). Memory: the operator process's VmRSS
(sampled) and VmHWM (peak), from ``/proc``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import Row, cpu_seconds

NAME = "operator"
GROUPS = int(os.environ.get("OPERATOR_BENCH_GROUPS", "100"))
CONTROLLERS = int(os.environ.get("OPERATOR_BENCH_CONTROLLERS", "3"))
ROUNDS = int(os.environ.get("OPERATOR_BENCH_ROUNDS", "2"))
CLUSTER = "DefaultCluster"
NS = "bench"
PODS = "v1/pods"


def group_name(g: int) -> str:
    return f"bg-{g:03d}"


def pod_ip(g: int, ordinal: int) -> str:
    return f"127.1.{g}.{ordinal + 1}"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


# ----------------------------------------------------------------------------- stand-ins


async def _standins(args: argparse.Namespace) -> None:
    """Host every stand-in broker; commands on stdin, answers on stdout (JSON lines)."""
    from mqcluster_testing.controller.standin import StandInBroker

    workdir = Path(args.workdir)
    brokers: dict[tuple[str, int], StandInBroker] = {}
    master: dict[str, int] = {}

    def make(g: int, ordinal: int) -> StandInBroker:
        name = group_name(g)
        return StandInBroker(args.controllers, CLUSTER, name, workdir / name / str(ordinal),
                             host=pod_ip(g, ordinal), epoch=1, heartbeat_interval=1.0,
                             heartbeat_timeout_ms=5000)

    async def in_sync(name: str, ordinal: int) -> None:
        broker = brokers[(name, ordinal)]
        info = await broker.client.get_replica_info(name)
        assert info.master_broker_id is not None
        await broker.client.alter_sync_state_set(
            name, info.master_broker_id, info.master_epoch,
            {info.master_broker_id, broker.broker_id}, info.sync_state_set_epoch)

    async def start_group(g: int) -> None:
        name = group_name(g)
        for ordinal in (0, 1):
            brokers[(name, ordinal)] = make(g, ordinal)
            await brokers[(name, ordinal)].start()
        master[name] = 0
        await in_sync(name, 1)

    limit = asyncio.Semaphore(8)

    async def limited(fn: Callable[[], Awaitable[None]]) -> None:
        async with limit:
            await fn()

    await asyncio.gather(*(limited(lambda g=g: start_group(g)) for g in range(args.groups)))
    print(json.dumps({"ready": {group_name(g): [brokers[(group_name(g), o)].broker_id
                                                for o in (0, 1)]
                                for g in range(args.groups)}}), flush=True)

    async def kill(name: str) -> None:
        await brokers[(name, master[name])].close()
        master[name] = 1 - master[name]

    async def revive(name: str) -> None:
        dead = 1 - master[name]
        g = int(name.rsplit("-", 1)[1])
        brokers[(name, dead)] = make(g, dead)
        await brokers[(name, dead)].start()
        await in_sync(name, dead)

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        cmd = json.loads(line)
        if "kill" in cmd:
            wall = time.time()
            await asyncio.gather(*(kill(n) for n in cmd["kill"]))
            print(json.dumps({"killed": cmd["kill"], "wall": wall}), flush=True)
        elif "revive" in cmd:
            await asyncio.gather(*(limited(lambda n=n: revive(n)) for n in cmd["revive"]))
            print(json.dumps({"revived": cmd["revive"]}), flush=True)


# ----------------------------------------------------------------------------- operator


async def _operator(args: argparse.Namespace) -> None:
    """The operator, alone in its process: production handlers, real controller probe."""
    import kopf

    from mqcluster_operator import handlers
    from mqcluster_operator.follow.election_probes import ProbeTarget, RemotingControllerProbe

    addrs = args.controllers.split(";")

    def factory(target: ProbeTarget) -> RemotingControllerProbe:
        # The Controller's pod DNS names do not resolve here: its real addresses instead.
        return RemotingControllerProbe(addrs)

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    if os.environ.get("OPERATOR_BENCH_DEBUG"):
        logging.getLogger("mqcluster_operator.follow.election_poller").setLevel(logging.DEBUG)
    registry = kopf.OperatorRegistry()
    handlers.register(registry)
    memo = kopf.Memo(connect=lambda **_: kopf.ConnectionInfo(server=args.server),
                     probe_factory=factory)
    await kopf.operator(registry=registry, memo=memo, clusterwide=True, standalone=True)


# ----------------------------------------------------------------------------- measuring


def proc_memory(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) in MiB."""
    values: dict[str, float] = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]


@dataclass
class Failover:
    group: str
    new_pod: str
    old_pod: str
    kind: str
    killed_wall: float = 0.0
    done_wall: float | None = None


@dataclass
class Watcher:
    """Pod roles as stored by the emulator, and when each pending failover completed."""

    roles: dict[str, str | None] = field(default_factory=dict)
    pending: dict[str, Failover] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def on_pod(self, name: str, labels: dict[str, str]) -> None:
        self.roles[name] = labels.get("role")
        group = name.rsplit("-", 1)[0]
        f = self.pending.get(group)
        if f is not None and self.roles.get(f.new_pod) == "master" \
                and self.roles.get(f.old_pod) != "master":
            f.done_wall = time.time()
            del self.pending[group]
            self.changed.set()


def make_emulator(watcher: Watcher) -> Any:
    import attrs
    import kmock
    from kmock._internal import enums, rendering

    from mqcluster_testing.operator.emulator import Emulator

    pods = kmock.resource(PODS)

    @attrs.define(kw_only=True)
    class WatchedEmulator(Emulator):
        async def _handle(self, request: rendering.Request) -> Any:
            result = await super()._handle(request)
            if request.action == enums.action.UPDATE and request.resource == pods:
                key = (request.resource, request.namespace, request.name)
                if key in self.objects and not self.objects[key].deleted:
                    meta = self.objects[key].raw.get("metadata") or {}
                    watcher.on_pod(str(request.name), dict(meta.get("labels") or {}))
            return result

    return WatchedEmulator()


class ElectionRecords:
    """Polls every controller's /health and keeps every election record they list.

    A controller lists only the elections it did, and the active one may change during
    the run (a controller stalled on a loaded machine loses its leadership): reading
    only the first active one lost every later record. Each lists its last 64: every
    0.2 s is enough for batches of up to 50 failovers.
    """

    def __init__(self, urls: list[str]) -> None:
        self.urls = urls
        self.records: dict[tuple[str, int], dict[str, Any]] = {}

    async def run(self) -> None:
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=1.0)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while True:
                for url in self.urls:
                    with contextlib.suppress(aiohttp.ClientError, TimeoutError, ValueError):
                        async with session.get(url) as resp:
                            data = json.loads(await resp.text())
                        for r in data.get("recentElections", []):
                            self.records.setdefault((r["broker_name"], r["master_epoch"]), r)
                await asyncio.sleep(0.2)

    def applied(self, group: str, after_wall: float) -> float | None:
        walls = [r["applied_wall_ms"] / 1000 for (name, _), r in self.records.items()
                 if name == group and r["detected_wall_ms"] / 1000 >= after_wall - 0.01]
        return min(walls) if walls else None


class JsonLines:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    async def read(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(self.proc.stdout.readline), timeout)
        if not line:
            raise RuntimeError("stand-in process exited")
        data: dict[str, Any] = json.loads(line)
        return data

    async def ask(self, cmd: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(cmd) + "\n").encode())
        self.proc.stdin.flush()
        return await self.read(timeout)


async def _eventually(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


def _spawn(argv: list[str], log: Path, pipes: bool = False) -> subprocess.Popen[bytes]:
    out = open(log, "wb")  # noqa: SIM115 - the child keeps its own copy
    try:
        return subprocess.Popen(
            argv, stdout=subprocess.PIPE if pipes else out, stderr=out,
            stdin=subprocess.PIPE if pipes else subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    finally:
        out.close()


def _stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def _main() -> list[Row]:
    import kmock
    import kopf

    from mqcluster_operator.k8s import Api
    from mqcluster_testing.controller.localcluster import LocalControllerCluster
    from mqcluster_testing.operator.failover import free_port

    me = [sys.executable, "-m", "bench.operator_bench"]
    watcher = Watcher()
    failovers: list[Failover] = []
    samples: list[tuple[float, float]] = []
    keep = os.environ.get("OPERATOR_BENCH_WORKDIR")
    with contextlib.ExitStack() as stack:
        workdir = Path(keep or stack.enter_context(
            tempfile.TemporaryDirectory(prefix="operator-bench-")))
        addrs = [f"127.0.0.{60 + i}:{free_port(f'127.0.0.{60 + i}')}"
                 for i in range(CONTROLLERS)]
        metrics = [free_port(a.rpartition(":")[0]) for a in addrs]
        cluster = LocalControllerCluster(
            addrs, workdir / "controllers", metrics_ports=metrics,
            options={"scanNotActiveBrokerInterval": "500"},
        )
        procs: list[subprocess.Popen[bytes]] = []
        tasks: list[asyncio.Task[None]] = []
        try:
            cluster.start_all()
            await cluster.wait_active(timeout=30)
            records = ElectionRecords([
                f"http://{cluster.addrs[n].rpartition(':')[0]}:{cluster.metrics_ports[n]}/health"
                for n in cluster.ids])
            tasks.append(asyncio.create_task(records.run()))

            standins = _spawn([*me, "standins", "--controllers", cluster.controller_addr,
                               "--groups", str(GROUPS), "--workdir", str(workdir / "brokers")],
                              workdir / "standins.log", pipes=True)
            procs.append(standins)
            lines = JsonLines(standins)
            ready = await lines.read(timeout=300)
            assert "ready" in ready, ready

            async with make_emulator(watcher) as emulator, kmock.Server(emulator) as server:
                url = str(server.url).rstrip("/")
                api = Api(kopf.ConnectionInfo(server=url))
                try:
                    await api.create({
                        "apiVersion": "mqcluster.io/v1alpha1", "kind": "Controller",
                        "metadata": {"name": "mqc", "namespace": NS},
                        "spec": {"replicas": CONTROLLERS},
                    })
                    for g in range(GROUPS):
                        for ordinal in (0, 1):
                            await api.create(_pod(group_name(g), ordinal, pod_ip(g, ordinal)))
                        await api.create({
                            "apiVersion": "mqcluster.io/v1alpha1", "kind": "BrokerGroup",
                            "metadata": {"name": group_name(g), "namespace": NS},
                            "spec": {"mode": "Controller", "replicas": 2,
                                     "controllerRef": {"name": "mqc"}},
                        })
                    operator = _spawn([*me, "operator", "--server", url,
                                       "--controllers", cluster.controller_addr],
                                      workdir / "operator.log")
                    procs.append(operator)
                    started = time.monotonic()

                    def followed() -> bool:
                        return all(watcher.roles.get(f"{group_name(g)}-0") == "master"
                                   and watcher.roles.get(f"{group_name(g)}-1") == "slave"
                                   for g in range(GROUPS))

                    await _eventually(followed, 300, "every group's master labelled")
                    await _eventually(lambda: all(
                        ((emulator.live("brokergroups.v1alpha1.mqcluster.io", NS, group_name(g))
                          or {}).get("status") or {}).get("masterPod") == f"{group_name(g)}-0"
                        for g in range(GROUPS)), 300, "every group's status.masterPod")
                    startup = time.monotonic() - started

                    async def sample() -> None:
                        while True:
                            with contextlib.suppress(OSError, KeyError):
                                samples.append(proc_memory(operator.pid))
                            await asyncio.sleep(0.5)

                    tasks.append(asyncio.create_task(sample()))
                    await asyncio.sleep(5)
                    cpu0, t0 = cpu_seconds([operator.pid]), time.monotonic()
                    await asyncio.sleep(10)
                    idle_cpu = (cpu_seconds([operator.pid]) - cpu0) / (time.monotonic() - t0)
                    rss_idle = proc_memory(operator.pid)[0]

                    master = dict.fromkeys((group_name(g) for g in range(GROUPS)), 0)

                    async def fail(group_ids: list[int], kind: str) -> None:
                        batch = []
                        for g in group_ids:
                            name = group_name(g)
                            old, new = master[name], 1 - master[name]
                            f = Failover(name, f"{name}-{new}", f"{name}-{old}", kind)
                            watcher.pending[name] = f
                            batch.append(f)
                            master[name] = new
                        answer = await lines.ask({"kill": [f.group for f in batch]})
                        for f in batch:
                            f.killed_wall = answer["wall"]
                        failovers.extend(batch)
                        await _eventually(lambda: all(f.done_wall for f in batch), 60,
                                          f"{kind} failover followed")

                    for _ in range(ROUNDS):
                        groups = list(range(GROUPS))
                        singles, tens, fifty = groups[:20], groups[20:50], groups[50:]
                        for g in singles:
                            await fail([g], "one by one")
                            await asyncio.sleep(0.3)
                        for i in range(0, len(tens), 10):
                            await fail(tens[i:i + 10], "10 at once")
                            await asyncio.sleep(1.0)
                        if fifty:
                            await fail(fifty, f"{len(fifty)} at once")
                        await asyncio.sleep(2.0)
                        await lines.ask({"revive": [group_name(g) for g in groups]}, 300)
                        await asyncio.sleep(3.0)
                    rss_end, hwm = proc_memory(operator.pid)
                    cpu_total = cpu_seconds([operator.pid])
                    await asyncio.sleep(0.5)
                finally:
                    for t in tasks:
                        t.cancel()
                    for p in procs:
                        _stop(p)
                    await api.close()
        finally:
            for p in procs:
                _stop(p, signal.SIGKILL)
            cluster.kill_all()

    if keep:
        dump = {"failovers": [vars(f) for f in failovers],
                "records": [r for r in records.records.values()]}
        (Path(keep) / "failovers.json").write_text(json.dumps(dump))
    return _rows(failovers, records, samples, rss_idle, rss_end, hwm, idle_cpu, cpu_total,
                 startup)


def _pod(group: str, ordinal: int, ip: str) -> dict[str, Any]:
    from mqcluster_operator import names

    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{group}-{ordinal}", "namespace": NS, "labels": {
            names.LABEL_NAME: "mqcluster-broker", names.LABEL_INSTANCE: group,
            names.LABEL_COMPONENT: "broker"}},
        "spec": {"containers": [{"name": "broker", "image": "mqcluster/broker:0.1.0"}]},
        "status": {"podIP": ip, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _rows(
    failovers: list[Failover], records: ElectionRecords, samples: list[tuple[float, float]],
    rss_idle: float, rss_end: float, hwm: float, idle_cpu: float, cpu_total: float,
    startup: float,
) -> list[Row]:
    rows: list[Row] = []
    by_kind: dict[str, list[float]] = {}
    kill_to_label: list[float] = []
    missing = 0
    for f in failovers:
        applied = records.applied(f.group, f.killed_wall)
        if applied is None or f.done_wall is None:
            missing += 1
            continue
        by_kind.setdefault(f.kind, []).append(f.done_wall - applied)
        by_kind.setdefault("all", []).append(f.done_wall - applied)
        kill_to_label.append(f.done_wall - f.killed_wall)
    setup = (f"{GROUPS} groups x 2 stand-ins, {CONTROLLERS} controllers, {ROUNDS} rounds;"
             f" poll 0.2 s shared, follow interval 2 s")
    every = by_kind.pop("all", [])
    if every:
        rows.append(Row(NAME, "ElectMaster applied -> Service selects new master, p50",
                        statistics.median(every), "s", note=setup))
        rows.append(Row(NAME, "ElectMaster applied -> Service selects new master, p99",
                        percentile(every, 0.99), "s", "< 1 s",
                        note=f"n={len(every)}, max {max(every):.3f} s,"
                             f" {missing} without an election record"))
    for kind, values in by_kind.items():
        rows.append(Row(NAME, f"  {kind}: p50 / p99", statistics.median(values), "s",
                        note=f"p99 {percentile(values, 0.99):.3f} s, n={len(values)}"))
    if kill_to_label:
        rows.append(Row(NAME, "master killed -> Service selects new master, p50",
                        statistics.median(kill_to_label), "s",
                        note=f"p99 {percentile(kill_to_label, 0.99):.3f} s; includes the"
                             " controllers' detection (connection closed) and election"))
    peak_sampled = max((s[0] for s in samples), default=rss_end)
    rows.append(Row(NAME, "operator process RSS, idle following", rss_idle, "MiB", "< 150 MiB",
                    note="separate process: kopf + handlers + probe; no emulator, no brokers"))
    rows.append(Row(NAME, "operator process RSS, peak (VmHWM)", hwm, "MiB", "< 150 MiB",
                    note=f"max sampled {peak_sampled:.1f} MiB, at end {rss_end:.1f} MiB"))
    rows.append(Row(NAME, "operator CPU while idle-following", idle_cpu * 100, "% of a core",
                    note=f"{cpu_total:.1f} s CPU in total"))
    rows.append(Row(NAME, "operator start -> all groups labelled and in status", startup, "s"))
    return rows


def run() -> list[Row]:
    """The real control plane's rows (operator_real: Ready, elections in both modes, idle
    request rates), then this emulator bench of 100 groups' failovers; the emulator's
    request rates only where the kit is absent."""
    from bench import operator_rate, operator_real

    real = operator_real.rows()
    rate = operator_rate.rows() if operator_real.kit_missing() else []
    return [*real, *asyncio.run(_main()), *rate]


def main(argv: list[str]) -> int:
    if not argv:
        from bench import render_table

        print(render_table(run()))
        return 0
    p = argparse.ArgumentParser(prog="bench.operator_bench")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("standins")
    s.add_argument("--controllers", required=True)
    s.add_argument("--groups", type=int, required=True)
    s.add_argument("--workdir", required=True)
    o = sub.add_parser("operator")
    o.add_argument("--server", required=True)
    o.add_argument("--controllers", required=True)
    args = p.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_standins(args) if args.cmd == "standins" else _operator(args))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
