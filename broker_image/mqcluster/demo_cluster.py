"""Demo, part two: a name server, three controllers and a broker on 127.0.0.x.

    python -m mqcluster.demo_cluster     (``make demo`` runs it after the Raft part)

Shows ``mqadmin`` against the cluster, the official RocketMQ 5 Python client
sending and receiving through the broker's gRPC endpoint, the active
controller SIGKILLed and replaced with identical metadata, and the broker
SIGKILLed and restarted with every acknowledged message still there.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rocketmq import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
)

from mqcluster.controller.localcluster import LocalControllerCluster
from mqcluster.namesrv.client import NamesrvClient
from mqcluster.raft.localgroup import free_loopback_addr
from mqcluster.wire.rpc import RpcError

TOPIC = "DemoOrders"
GROUP = "demo-consumers"


def say(text: str = "") -> None:
    print(text, flush=True)


def indent(text: str) -> str:
    return "\n".join(f"     {line}" for line in text.rstrip().splitlines())


class Process:
    """One child process with its output in a log file; SIGKILLed on close."""

    def __init__(self, name: str, argv: list[str], log_path: Path) -> None:
        self.name, self.argv, self.log_path = name, argv, log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_start = 0

    def start(self) -> None:
        self.log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    async def wait_log(self, marker: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if marker in self.log_path.read_bytes()[self.log_start :].decode(errors="replace"):
                return
            if self.proc is not None and self.proc.poll() is not None:
                break
            await asyncio.sleep(0.05)
        tail = "\n".join(self.log_path.read_text(errors="replace").splitlines()[-20:])
        raise RuntimeError(f"{self.name} did not boot:\n{tail}")


def mqadmin(*args: str) -> str:
    res = subprocess.run(
        [sys.executable, "-m", "mqcluster.admin.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return res.stdout if res.returncode == 0 else f"(exit {res.returncode}) {res.stderr}"


def client_config(endpoint: str) -> ClientConfiguration:
    return ClientConfiguration(endpoint, Credentials(), request_timeout=10)


def send_orders(endpoint: str, first: int, count: int) -> list[str]:
    producer = Producer(client_config(endpoint), (TOPIC,))
    producer.startup()
    try:
        ids = []
        for i in range(first, first + count):
            msg = Message()
            msg.topic, msg.body, msg.tag = TOPIC, f"order-{i}".encode(), "created"
            msg.keys = f"order-{i}"
            msg.add_property("region", "eu")
            ids.append(producer.send(msg).message_id)
        return ids
    finally:
        producer.shutdown()


def receive_orders(endpoint: str, count: int, deadline_s: float = 30.0) -> list[Message]:
    consumer = SimpleConsumer(
        client_config(endpoint), GROUP, {TOPIC: FilterExpression("created")}, await_duration=2
    )
    consumer.startup()
    got: list[Message] = []
    try:
        give_up = time.monotonic() + deadline_s
        while len(got) < count and time.monotonic() < give_up:
            for m in consumer.receive(16, 15):
                got.append(m)
                consumer.ack(m)
        return got
    finally:
        consumer.shutdown()


async def wait_broker_registered(namesrv: str, broker: str, timeout: float = 30.0) -> None:
    client = NamesrvClient([namesrv])
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                info = await client.get_cluster_info()
                if broker in info.master_addrs():
                    return
            except (RpcError, OSError):
                pass
            await asyncio.sleep(0.1)
    finally:
        await client.close()
    raise TimeoutError(f"broker {broker} did not register with {namesrv}")


def broker_argv(root: Path, namesrv: str, broker: str) -> tuple[list[str], str]:
    ip, _, port = broker.rpartition(":")
    props = {
        "brokerClusterName": "DemoCluster",
        "brokerName": "broker-a",
        "brokerId": "0",
        "brokerIP1": ip,
        "bindAddress": ip,
        "listenPort": port,
        "grpcServerPort": free_loopback_addr(ip).rpartition(":")[2],
        "namesrvAddr": namesrv,
        "storePathRootDir": str(root / "broker-a"),
        "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
        "flushDiskType": "SYNC_FLUSH",
        "autoCreateTopicEnable": "true",
        "registerNameServerPeriod": "1000",
    }
    conf = root / "broker-a.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return [sys.executable, "-m", "mqcluster.broker.main", "-c", str(conf)], props["grpcServerPort"]


async def run(root: Path) -> None:
    namesrv_addr = free_loopback_addr()
    ns_ip, _, ns_port = namesrv_addr.rpartition(":")
    namesrv = Process(
        "mqnamesrv",
        [sys.executable, "-m", "mqcluster.namesrv.main", "-p", ns_port, "--bindAddress", ns_ip],
        root / "namesrv.log",
    )
    controllers = LocalControllerCluster([free_loopback_addr() for _ in range(3)], root / "ctl")
    broker_addr = free_loopback_addr()
    argv, grpc_port = broker_argv(root, namesrv_addr, broker_addr)
    broker = Process("mqbroker", argv, root / "broker.log")
    endpoint = f"{broker_addr.rpartition(':')[0]}:{grpc_port}"
    try:
        say("== 5. start a name server, three controllers and a broker")
        namesrv.start()
        controllers.start_all()
        broker.start()
        await namesrv.wait_log("boot success")
        await broker.wait_log("boot success")
        await wait_broker_registered(namesrv_addr, broker_addr)
        active = await controllers.wait_active(timeout=30)
        say(f"   mqadmin clusterList -n {namesrv_addr}")
        say(indent(mqadmin("clusterList", "-n", namesrv_addr)))
        say(f"   mqadmin getControllerMetaData -a {active.self_addr}")
        say(indent(mqadmin("getControllerMetaData", "-a", active.self_addr)))

        say("\n== 6. the official RocketMQ 5 client sends and receives through the broker")
        ids = await asyncio.to_thread(send_orders, endpoint, 1, 5)
        say(f"   sent order-1..order-5 (SYNC_FLUSH): message ids {ids[0]} ... {ids[-1]}")
        got = await asyncio.to_thread(receive_orders, endpoint, 5)
        for m in got:
            props = m.properties or {}
            say(
                f"   received {m.body.decode():<8} tag={m.tag} keys={','.join(m.keys or [])} "
                f"region={props.get('region')}"
            )

        old = controllers.node_of(active.self_addr)
        say(f"\n== 7. SIGKILL the active controller {old} ({active.self_addr})")
        controllers.kill(old)
        t0 = time.monotonic()
        new = await controllers.wait_active(timeout=30, exclude={old})
        say(
            f"   new active controller {new.self_addr} after "
            f"{(time.monotonic() - t0) * 1000:.0f} ms"
        )
        say(indent(mqadmin("getControllerMetaData", "-a", new.self_addr)))

        say("\n== 8. send three more, SIGKILL the broker, restart it: nothing acknowledged is lost")
        await asyncio.to_thread(send_orders, endpoint, 6, 3)
        broker.kill()
        say("   broker killed with SIGKILL after acknowledging order-6..order-8")
        broker.start()
        await broker.wait_log("boot success")
        got = await asyncio.to_thread(receive_orders, endpoint, 8)
        bodies = sorted({m.body.decode() for m in got}, key=lambda b: int(b.split("-")[1]))
        say(f"   after restart the consumer receives: {', '.join(bodies)}")
        if not {"order-6", "order-7", "order-8"} <= set(bodies):
            raise SystemExit("acknowledged messages missing after the broker restart")
        redelivered = [b for b in bodies if b not in ("order-6", "order-7", "order-8")]
        if redelivered:
            say(
                f"   {', '.join(redelivered)} came again: consume progress is flushed every "
                "flushConsumerOffsetInterval (5 s),"
            )
            say("   so a kill -9 redelivers what was consumed since: at-least-once, as RocketMQ")
    except BaseException:
        for log in sorted(root.rglob("*.log")):
            say(f"--- {log.name} (last lines)")
            say("\n".join(log.read_text(errors="replace").splitlines()[-15:]))
        raise
    finally:
        broker.kill()
        controllers.kill_all()
        namesrv.kill()
    say("\n== done: cluster stopped, temporary directory removed")


def main() -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mqcluster-demo-") as tmp:
        asyncio.run(run(Path(tmp)))
    say(f"   total {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
