"""Single broker, 1 KiB messages: native client (batched ASYNC_FLUSH, concurrent SYNC_FLUSH),
the official gRPC client, and broker RSS with 1,000 queues.

Every rate is printed with the baseline it is compared to (``limit``) and their ratio,
all measured in the same run:

* native batched ASYNC_FLUSH (batches of ``BATCH`` and ``BIG_BATCH``): the disk's raw
  sequential write rate, in stored records/s.
* native SYNC_FLUSH: the disk's group-commit limit for ``SYNC_SENDERS`` synchronous
  senders. Each sender has one message in flight, so one fsync can cover at most
  ``SYNC_SENDERS`` messages; the limit is (raw append of ``SYNC_SENDERS`` records +
  fdatasync, per second) x ``SYNC_SENDERS``, in the store's directory. The messages per
  group commit the broker actually achieved (from its fsync round counter) are printed.
  Measured twice: one request per message, and with the producer's ``auto_batch``
  (concurrent sends of one loop turn share a batch request; each is still acknowledged
  only after the fsync that covers it).
* gRPC official client: the same client, threads and producers against a no-op
  MessagingService (``bench.grpc_noop``, same grpc.aio stack, stores nothing) started
  in this run: the ceiling of the client library, grpc and loopback on this machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import random
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any

from bench import Row, cpu_seconds
from mqcluster.client import AdminClient, Message, Producer
from mqcluster.client.broker_api import BrokerApi
from mqcluster.protocol.properties import PROPERTY_UNIQ_KEY
from mqcluster.store.codec import prepare
from mqcluster.store.message import MessageRecord

NAME = "broker"
MSG_SIZE = 1024
PHASE_SECONDS = 3.0
BATCH = 32
BATCH_SENDERS = 4
BIG_BATCH = 128
BIG_BATCH_SENDERS = 4
SYNC_SENDERS = 64
GRPC_PRODUCERS = 2
GRPC_THREADS = 8
GRPC_WINDOW = 64
RSS_TOPICS = 125
RSS_QUEUES_PER_TOPIC = 8
RSS_LIMIT_MIB = 200


# ------------------------------------------------------------------ disk


def record_size() -> int:
    """Bytes one bench message takes in the commitlog (header, hosts, topic, UNIQ_KEY)."""
    rec = MessageRecord(
        "BenchSync", 0, bytes(MSG_SIZE), properties={PROPERTY_UNIQ_KEY: "0" * 32},
        born_host="127.0.0.255:65535",
    )  # fmt: skip
    return prepare(rec, "127.0.0.255:65535").size


@dataclass(frozen=True)
class DiskRates:
    seq_mib_s: float
    """Sequential 1 MiB writes, 64 MiB, including the final fsync."""
    fsync_small: float
    """4 KiB append + fdatasync, per second."""
    fsync_group: float
    """Append of SYNC_SENDERS records + fdatasync, per second (one full group commit)."""


def _fsync_loop(fd: int, chunk: bytes, seconds: float) -> float:
    n, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        os.write(fd, chunk)
        os.fdatasync(fd)
        n += 1
    return n / (time.perf_counter() - started)


def disk_rates(directory: Path, group_bytes: int) -> DiskRates:
    path = directory / "disk-probe"
    chunk = os.urandom(1024 * 1024)
    total_mib = 64
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        started = time.perf_counter()
        for _ in range(total_mib):
            os.write(fd, chunk)
        os.fsync(fd)
        seq = total_mib / (time.perf_counter() - started)
        small = _fsync_loop(fd, chunk[:4096], 1.5)
        group = _fsync_loop(fd, os.urandom(group_bytes), 1.5)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return DiskRates(seq, small, group)


# ------------------------------------------------------------------ broker process


def _free_port(ip: str) -> int:
    with socket.socket() as s:
        s.bind((ip, 0))
        return int(s.getsockname()[1])


class BrokerProcess:
    def __init__(self, root: Path, ip: str, **props: str) -> None:
        self.ip = ip
        self.props = {
            "brokerName": "bench-broker",
            "brokerIP1": ip,
            "bindAddress": ip,
            "listenPort": str(_free_port(ip)),
            "haListenPort": str(_free_port(ip)),
            "grpcServerPort": str(_free_port(ip)),
            "metricsPromExporterPort": str(_free_port(ip)),
            "storePathRootDir": str(root / "store"),
            "mappedFileSizeCommitLog": str(256 * 1024 * 1024),
            "enableProxy": "false",
            **props,
        }
        self.conf = root / "broker.conf"
        self.conf.write_text("".join(f"{k}={v}\n" for k, v in self.props.items()))
        self.log = root / "broker.log"
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def addr(self) -> str:
        return f"{self.ip}:{self.props['listenPort']}"

    @property
    def grpc_addr(self) -> str:
        return f"{self.ip}:{self.props['grpcServerPort']}"

    async def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "mqcluster.broker.main", "-c", str(self.conf),
                stdout=asyncio.subprocess.PIPE, stderr=log,
            )  # fmt: skip
        assert self.proc.stdout is not None
        while True:
            line = await asyncio.wait_for(self.proc.stdout.readline(), 60)
            if not line:
                raise RuntimeError(f"broker exited: see {self.log}")
            if b"boot success" in line:
                return

    def rss_mib(self) -> float:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 30)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


class NoopGrpcProcess:
    """``bench.grpc_noop`` in its own process, as the broker runs in its own."""

    def __init__(self, ip: str) -> None:
        self.addr = f"{ip}:{_free_port(ip)}"
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        host, _, port = self.addr.rpartition(":")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.grpc_noop", host, port,
            stdout=asyncio.subprocess.PIPE, cwd=str(Path(__file__).resolve().parent.parent),
        )  # fmt: skip
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 60)
        if b"ready" not in line:
            raise RuntimeError("no-op gRPC server did not start")

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            await self.proc.wait()


# ------------------------------------------------------------------ load


class CpuMeter:
    """CPUs used by the broker process and by this (the clients') process since creation."""

    def __init__(self, broker: BrokerProcess) -> None:
        assert broker.proc is not None
        self.pid = broker.proc.pid
        self.started = time.monotonic()
        self.broker0 = cpu_seconds([self.pid])
        self.client0 = cpu_seconds([os.getpid()])

    def report(self) -> str:
        wall = time.monotonic() - self.started
        broker = (cpu_seconds([self.pid]) - self.broker0) / wall
        client = (cpu_seconds([os.getpid()]) - self.client0) / wall
        return f"CPUs used: broker {broker:.2f}, client {client:.2f} of {os.cpu_count()}"


def p99(latencies: list[float]) -> float | None:
    if not latencies:
        return None
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000


async def drive(
    senders: int, one: Callable[[], Awaitable[int]], seconds: float
) -> tuple[float, list[float]]:
    """Run ``senders`` loops of ``one()`` (returns messages sent) for ``seconds``."""
    latencies: list[float] = []
    count = 0
    deadline = time.perf_counter() + seconds

    async def loop() -> None:
        nonlocal count
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            sent = await one()
            count += sent
            latencies.append(time.perf_counter() - t0)

    started = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(senders)))
    return count / (time.perf_counter() - started), latencies


def body() -> bytes:
    return random.randbytes(MSG_SIZE)


async def native_batched(
    broker: BrokerProcess, batch: int, senders: int
) -> tuple[float, list[float]]:
    async with AdminClient(broker_addr=broker.addr) as admin:
        await admin.create_topic("BenchBatch", queue_nums=8)
    async with Producer(broker_addr=broker.addr, retries=0) as producer:
        payload = body()

        async def one() -> int:
            msgs = [Message("BenchBatch", payload) for _ in range(batch)]
            return len(await producer.send_batch(msgs))

        return await drive(senders, one, PHASE_SECONDS)


async def flush_rounds(addr: str) -> int:
    api = BrokerApi()
    try:
        return int((await api.runtime_info(addr)).get("commitLogFlushRounds", "0"))
    finally:
        await api.close()


async def native_sync_flush(
    broker: BrokerProcess, auto_batch: bool
) -> tuple[float, list[float], float]:
    """(rate, latencies, messages per group commit)."""
    async with AdminClient(broker_addr=broker.addr) as admin:
        await admin.create_topic("BenchSync", queue_nums=8)
    options: dict[str, Any] = {"auto_batch": True} if auto_batch else {}
    async with Producer(broker_addr=broker.addr, retries=0, **options) as producer:
        payload = body()
        rounds = await flush_rounds(broker.addr)

        async def one() -> int:
            await producer.send(Message("BenchSync", payload))
            return 1

        rate, lat = await drive(SYNC_SENDERS, one, PHASE_SECONDS)
        rounds = await flush_rounds(broker.addr) - rounds
        return rate, lat, len(lat) / max(1, rounds)


GRPC_TOPIC = "BenchGrpc"


@contextlib.contextmanager
def grpc_producers(endpoint: str) -> Iterator[list[Any]]:
    """GRPC_PRODUCERS started official producers for GRPC_TOPIC, shut down on exit."""
    from rocketmq import ClientConfiguration, Credentials
    from rocketmq import Producer as GrpcProducer

    producers = [
        GrpcProducer(
            ClientConfiguration(endpoint, Credentials(), request_timeout=10), (GRPC_TOPIC,)
        )
        for _ in range(GRPC_PRODUCERS)
    ]
    for producer in producers:
        producer.startup()
    try:
        yield producers
    finally:
        for producer in producers:
            producer.shutdown()


def grpc_message(payload: bytes) -> Any:
    from rocketmq import Message as GrpcMessage

    msg = GrpcMessage()
    msg.topic = GRPC_TOPIC
    msg.body = payload
    return msg


def grpc_official(endpoint: str) -> tuple[float, list[float]]:
    """GRPC_PRODUCERS producers, GRPC_THREADS threads each calling ``send`` in a loop."""
    latencies: list[float] = []
    count = 0
    lock = threading.Lock()
    payload = body()
    deadline = time.perf_counter() + PHASE_SECONDS

    def loop(producer: Any) -> None:
        nonlocal count
        while time.perf_counter() < deadline:
            msg = grpc_message(payload)
            t0 = time.perf_counter()
            producer.send(msg)
            with lock:
                latencies.append(time.perf_counter() - t0)
                count += 1

    with grpc_producers(endpoint) as producers:
        started = time.perf_counter()
        threads = [
            threading.Thread(target=loop, args=(p,)) for p in producers for _ in range(GRPC_THREADS)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return count / (time.perf_counter() - started), latencies


def grpc_official_async(endpoint: str) -> tuple[float, list[float]]:
    """GRPC_PRODUCERS producers fed from one thread with ``send_async``, GRPC_WINDOW in flight."""
    latencies: list[float] = []
    lock = threading.Lock()
    window = threading.Semaphore(GRPC_WINDOW)
    payload = body()

    def done(t0: float, future: Any) -> None:
        ok = future.exception() is None
        with lock:
            if ok:
                latencies.append(time.perf_counter() - t0)
        window.release()

    with grpc_producers(endpoint) as producers:
        started = time.perf_counter()
        deadline = started + PHASE_SECONDS
        i = 0
        while time.perf_counter() < deadline:
            window.acquire()
            msg = grpc_message(payload)
            t0 = time.perf_counter()
            future = producers[i % len(producers)].send_async(msg)
            future.add_done_callback(lambda f, t0=t0: done(t0, f))
            i += 1
        for _ in range(GRPC_WINDOW):
            window.acquire()
        return len(latencies) / (time.perf_counter() - started), latencies


async def rss_with_queues(broker: BrokerProcess) -> tuple[float, float]:
    idle = broker.rss_mib()
    async with AdminClient(broker_addr=broker.addr) as admin:
        for t in range(RSS_TOPICS):
            await admin.create_topic(f"RssTopic{t}", queue_nums=RSS_QUEUES_PER_TOPIC)
    async with Producer(broker_addr=broker.addr, retries=0) as producer:
        payload = body()
        for t in range(RSS_TOPICS):
            route = await producer.routes.route(f"RssTopic{t}", for_write=True)
            for q in route.write_queues:
                await producer.send(Message(f"RssTopic{t}", payload), q)
    return idle, broker.rss_mib()


# ------------------------------------------------------------------ run


def grpc_endpoint_available() -> bool:
    try:
        import mqcluster.broker.grpc as grpc_endpoint
    except ImportError:
        return False
    return hasattr(grpc_endpoint, "start_grpc_server")


def best_disk(a: DiskRates, b: DiskRates) -> DiskRates:
    """The disk's capability: the better of two probes (a lower one met interference)."""
    return DiskRates(*(max(x, y) for x, y in zip(astuple(a), astuple(b), strict=True)))


def disk_rows(disk: DiskRates, rec_size: int) -> list[Row]:
    probes = "best of 2 probes (before and after the broker runs)"
    return [
        Row(NAME, "disk sequential write", disk.seq_mib_s, "MiB/s",
            note=f"64 MiB + fsync; {probes}"),
        Row(NAME, "disk fsync rate", disk.fsync_small, "fsync/s",
            note=f"4 KiB append + fdatasync; {probes}"),
        Row(NAME, "disk group-commit fsync rate", disk.fsync_group, "fsync/s",
            note=f"{SYNC_SENDERS} x {rec_size} B records appended + fdatasync; {probes}"),
    ]  # fmt: skip


async def _run(root: Path) -> list[Row]:
    rec_size = record_size()
    group_bytes = SYNC_SENDERS * rec_size
    first_probe = disk_rates(root, group_bytes)
    ip = f"127.0.0.{random.randint(2, 250)}"

    async def with_broker(sub: str, **props: str) -> BrokerProcess:
        (root / sub).mkdir()
        broker = BrokerProcess(root / sub, ip, **props)
        await broker.start()
        return broker

    batched: list[tuple[int, int, float, list[float], str]] = []
    broker = await with_broker("async", flushDiskType="ASYNC_FLUSH")
    try:
        for batch, senders in ((BATCH, BATCH_SENDERS), (BIG_BATCH, BIG_BATCH_SENDERS)):
            cpu = CpuMeter(broker)
            rate, lat = await native_batched(broker, batch, senders)
            batched.append((batch, senders, rate, lat, cpu.report()))
        idle, loaded = await rss_with_queues(broker)
    finally:
        await broker.stop()

    synced: list[tuple[str, str, float, list[float], float]] = []
    broker = await with_broker("sync", flushDiskType="SYNC_FLUSH")
    try:
        modes = [(False, "one request each"), (True, "producer auto-batch")]
        if "auto_batch" not in inspect.signature(Producer).parameters:  # an older client
            modes = modes[:1]
        for auto_batch, how in modes:
            label = "native SYNC_FLUSH" + (", auto-batch" if auto_batch else "")
            synced.append((label, how, *await native_sync_flush(broker, auto_batch)))
    finally:
        await broker.stop()

    disk = best_disk(first_probe, disk_rates(root, group_bytes))
    seq_msgs = disk.seq_mib_s * 1024 * 1024 / rec_size
    group_limit = disk.fsync_group * SYNC_SENDERS
    rows = disk_rows(disk, rec_size)
    for batch, senders, rate, lat, cpu_use in batched:
        rows.append(
            Row(NAME, f"native batched ASYNC_FLUSH, {batch}/batch", rate, "msg/s",
                ">= 100,000", seq_msgs, f"{senders} senders x batches of {batch}; "
                f"limit = raw sequential write in {rec_size} B records; {cpu_use}")
        )  # fmt: skip
        rows.append(
            Row(NAME, f"native batched p99, {batch}/batch", p99(lat), "ms",
                note="per batch request")
        )  # fmt: skip
    rows.append(
        Row(NAME, "broker RSS, 1,000 queues", loaded, "MiB", f"< {RSS_LIMIT_MIB}",
            RSS_LIMIT_MIB, f"{idle:.0f} MiB before; limit = the target")
    )  # fmt: skip
    for label, how, rate, lat, per_commit in synced:
        rows.append(
            Row(NAME, label, rate, "msg/s", ">= 0.40 x limit", group_limit,
                f"{SYNC_SENDERS} senders x 1 msg in flight, {how}; limit = group-commit "
                f"fsync/s x {SYNC_SENDERS} (the most one fsync can cover)")
        )  # fmt: skip
        rows.append(
            Row(NAME, f"{label} msgs per fsync", per_commit, "msg", limit=SYNC_SENDERS,
                note="achieved group-commit size")
        )  # fmt: skip
        rows.append(Row(NAME, f"{label} p99", p99(lat), "ms", note="per message"))

    if not grpc_endpoint_available():
        rows.append(Row(NAME, "gRPC official client", None, "msg/s", note="no gRPC endpoint"))
        return rows
    return rows + await grpc_rows(ip, with_broker)


async def _noop_grpc(
    ip: str, send: Callable[[str], tuple[float, list[float]]] = grpc_official
) -> tuple[float, list[float]]:
    noop = NoopGrpcProcess(ip)
    await noop.start()
    try:
        return await asyncio.to_thread(send, noop.addr)
    finally:
        await noop.stop()


async def grpc_rows(ip: str, with_broker: Callable[..., Awaitable[BrokerProcess]]) -> list[Row]:
    """The endpoint between two runs against the no-op server; the better one is the limit."""
    clients = f"{GRPC_PRODUCERS} producers x {GRPC_THREADS} threads"
    before = await _noop_grpc(ip)
    broker = await with_broker("grpc", flushDiskType="ASYNC_FLUSH", enableProxy="true")
    try:
        cpu = CpuMeter(broker)
        rate_g, lat_g = await asyncio.to_thread(grpc_official, broker.grpc_addr)
        cpu_g = cpu.report()
        cpu = CpuMeter(broker)
        rate_a, lat_a = await asyncio.to_thread(grpc_official_async, broker.grpc_addr)
        cpu_a = cpu.report()
    except Exception as exc:
        return [Row(NAME, "gRPC official client", None, "msg/s", note=f"unavailable: {exc}")]
    finally:
        await broker.stop()
    after = await _noop_grpc(ip)
    noop_rate, noop_lat = max(before, after, key=lambda r: r[0])
    noop_async, _ = await _noop_grpc(ip, grpc_official_async)
    async_clients = f"{GRPC_PRODUCERS} producers, send_async, {GRPC_WINDOW} in flight"
    return [
        Row(NAME, "gRPC official client, no-op server", noop_rate, "msg/s",
            note=f"{clients}; client + grpc + loopback ceiling (bench.grpc_noop), "
            f"best of runs before and after the endpoint's"),
        Row(NAME, "gRPC no-op server p99", p99(noop_lat), "ms"),
        Row(NAME, "gRPC official client", rate_g, "msg/s", ">= 5,000", noop_rate,
            f"{clients}, ASYNC_FLUSH; limit = the no-op server above; {cpu_g}"),
        Row(NAME, "gRPC official client p99", p99(lat_g), "ms"),
        Row(NAME, "gRPC official client, send_async", rate_a, "msg/s", ">= 5,000", noop_async,
            f"{async_clients}; limit = the same against the no-op server; {cpu_a}"),
        Row(NAME, "gRPC official client, send_async p99", p99(lat_a), "ms"),
    ]  # fmt: skip


def run() -> list[Row]:
    root = Path(tempfile.mkdtemp(prefix="broker-bench-"))
    try:
        return asyncio.run(_run(root))
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(root)
