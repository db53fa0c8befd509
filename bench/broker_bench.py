"""Single broker, 1 KiB messages: native client (batched ASYNC_FLUSH, concurrent SYNC_FLUSH),
the official gRPC client, and broker RSS with 1,000 queues.

The disk's raw sequential-write and fsync rates are measured in the same run,
in the same directory as the store, and are the limits the rates compare to.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench import Row
from mqcluster.client import AdminClient, Message, Producer

NAME = "broker"
MSG_SIZE = 1024
PHASE_SECONDS = 3.0
BATCH = 32
BATCH_SENDERS = 4
SYNC_SENDERS = 64
GRPC_SENDERS = 16
RSS_TOPICS = 125
RSS_QUEUES_PER_TOPIC = 8


# ------------------------------------------------------------------ disk


def disk_rates(directory: Path) -> tuple[float, float]:
    """(sequential write MiB/s including a final fsync, fsyncs/s of 4 KiB appends)."""
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
        small = chunk[:4096]
        n, started = 0, time.perf_counter()
        while time.perf_counter() - started < 1.5:
            os.write(fd, small)
            os.fdatasync(fd)
            n += 1
        fsyncs = n / (time.perf_counter() - started)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return seq, fsyncs


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


# ------------------------------------------------------------------ load


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


async def native_batched(broker: BrokerProcess) -> tuple[float, list[float]]:
    async with AdminClient(broker_addr=broker.addr) as admin:
        await admin.create_topic("BenchBatch", queue_nums=8)
    async with Producer(broker_addr=broker.addr, retries=0) as producer:
        payload = body()

        async def one() -> int:
            msgs = [Message("BenchBatch", payload) for _ in range(BATCH)]
            return len(await producer.send_batch(msgs))

        return await drive(BATCH_SENDERS, one, PHASE_SECONDS)


async def native_sync_flush(broker: BrokerProcess) -> tuple[float, list[float]]:
    async with AdminClient(broker_addr=broker.addr) as admin:
        await admin.create_topic("BenchSync", queue_nums=8)
    async with Producer(broker_addr=broker.addr, retries=0) as producer:
        payload = body()

        async def one() -> int:
            await producer.send(Message("BenchSync", payload))
            return 1

        return await drive(SYNC_SENDERS, one, PHASE_SECONDS)


def grpc_official(endpoint: str) -> tuple[float, list[float]]:
    from rocketmq import ClientConfiguration, Credentials
    from rocketmq import Message as GrpcMessage
    from rocketmq import Producer as GrpcProducer

    topic = "BenchGrpc"
    producer = GrpcProducer(
        ClientConfiguration(endpoint, Credentials(), request_timeout=10), (topic,)
    )
    producer.startup()
    latencies: list[float] = []
    count = 0
    lock = threading.Lock()
    payload = body()
    deadline = time.perf_counter() + PHASE_SECONDS

    def loop() -> None:
        nonlocal count
        while time.perf_counter() < deadline:
            msg = GrpcMessage()
            msg.topic = topic
            msg.body = payload
            t0 = time.perf_counter()
            producer.send(msg)
            with lock:
                latencies.append(time.perf_counter() - t0)
                count += 1

    try:
        started = time.perf_counter()
        threads = [threading.Thread(target=loop) for _ in range(GRPC_SENDERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return count / (time.perf_counter() - started), latencies
    finally:
        producer.shutdown()


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


async def _run(root: Path) -> list[Row]:
    rows: list[Row] = []
    seq_mib, fsyncs = disk_rates(root)
    seq_msgs = seq_mib * 1024 * 1024 / MSG_SIZE
    rows.append(Row(NAME, "disk sequential write", seq_mib, "MiB/s", note="64 MiB + fsync"))
    rows.append(Row(NAME, "disk fsync rate", fsyncs, "fsync/s", note="4 KiB append + fdatasync"))
    ip = f"127.0.0.{random.randint(2, 250)}"

    async def with_broker(sub: str, **props: str) -> BrokerProcess:
        (root / sub).mkdir()
        broker = BrokerProcess(root / sub, ip, **props)
        await broker.start()
        return broker

    broker = await with_broker("async", flushDiskType="ASYNC_FLUSH")
    try:
        rate, lat = await native_batched(broker)
        note = f"{BATCH_SENDERS} senders x batches of {BATCH}; limit = raw sequential write"
        rows.append(
            Row(NAME, "native batched ASYNC_FLUSH", rate, "msg/s", limit=seq_msgs, note=note)
        )
        rows.append(Row(NAME, "native batched p99", p99(lat), "ms", note="per batch request"))
        idle, loaded = await rss_with_queues(broker)
        rows.append(
            Row(NAME, "broker RSS, 1,000 queues", loaded, "MiB", note=f"{idle:.0f} MiB before")
        )
    finally:
        await broker.stop()

    broker = await with_broker("sync", flushDiskType="SYNC_FLUSH")
    try:
        rate, lat = await native_sync_flush(broker)
        rows.append(
            Row(NAME, "native SYNC_FLUSH", rate, "msg/s", limit=fsyncs,
                note=f"{SYNC_SENDERS} senders; limit = raw fsync/s")
        )  # fmt: skip
        rows.append(Row(NAME, "native SYNC_FLUSH p99", p99(lat), "ms"))
    finally:
        await broker.stop()

    if not grpc_endpoint_available():
        rows.append(Row(NAME, "gRPC official client", None, "msg/s", note="no gRPC endpoint"))
        return rows
    broker = await with_broker("grpc", flushDiskType="ASYNC_FLUSH", enableProxy="true")
    try:
        rate_g, lat_g = await asyncio.to_thread(grpc_official, broker.grpc_addr)
        rows.append(
            Row(NAME, "gRPC official client", rate_g, "msg/s", limit=seq_msgs,
                note=f"{GRPC_SENDERS} threads, ASYNC_FLUSH")
        )  # fmt: skip
        rows.append(Row(NAME, "gRPC official client p99", p99(lat_g), "ms"))
    except Exception as exc:
        rows.append(Row(NAME, "gRPC official client", None, "msg/s", note=f"unavailable: {exc}"))
    finally:
        await broker.stop()
    return rows


def run() -> list[Row]:
    root = Path(tempfile.mkdtemp(prefix="broker-bench-"))
    try:
        return asyncio.run(_run(root))
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(root)
