"""ACL 2.0's cost: gRPC sends to a broker with authentication and authorization on
(every call signed as the official client signs it, a Normal user whose policy allows
the topic) against the same broker build with both off, alternating phases in the
same run. Messages/s and the broker's CPU microseconds per message."""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import grpc
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from bench import Row, cpu_seconds
from bench.proxy_bench import BATCH, MSG_SIZE, PHASE_SECONDS, SEND, SENDERS, TOPIC, request
from mqcluster.auth.credentials import Credentials
from mqcluster.auth.signature import grpc_authorization
from mqcluster.client import AdminClient
from mqcluster_testing.broker.procs import BrokerProc, start_broker

NAME = "auth"
QUICK = os.environ.get("BENCH_QUICK") == "1"
ROUNDS = int(os.environ.get("AUTH_BENCH_ROUNDS", "1" if QUICK else "3"))
ROOT = Credentials("root", "root-secret")
USER = Credentials("bench", "bench-secret")
ACL = {"users": [{"username": USER.access_key, "password": USER.secret_key}],
       "acls": [{"subject": f"User:{USER.access_key}", "policies": [{"entries": [
           {"resource": f"Topic:{TOPIC}", "actions": ["Pub"], "decision": "Allow"}]}]}]}


def metadata(creds: Credentials | None) -> tuple[tuple[str, str], ...]:
    base = (("x-mq-client-id", "auth-bench"),)
    if creds is None:
        return base
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return (*base, ("x-mq-date-time", stamp),
            ("authorization", grpc_authorization(creds.access_key, creds.secret_key, stamp)))


async def phase(broker: BrokerProc, creds: Credentials | None) -> tuple[float, float]:
    """Messages/s and the broker's CPU seconds per message."""
    assert broker.proc is not None
    endpoint = f"{broker.ip}:{broker.props['grpcServerPort']}"
    body = request(random.randbytes(MSG_SIZE))
    count = 0
    async with grpc.aio.insecure_channel(endpoint) as channel:
        send = channel.unary_unary(SEND)
        first = spb.SendMessageResponse.FromString(
            await send(body, timeout=10, metadata=metadata(creds)))
        if first.status.code != pb.Code.OK:
            raise RuntimeError(f"send refused: {first.status.message}")
        cpu0 = cpu_seconds([broker.proc.pid])
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + PHASE_SECONDS

        async def sender() -> None:
            nonlocal count
            while loop.time() < deadline:
                # signed per call, as the official client does
                raw = await send(body, timeout=10, metadata=metadata(creds))
                if spb.SendMessageResponse.FromString(raw).status.code == pb.Code.OK:
                    count += BATCH

        await asyncio.gather(*(sender() for _ in range(SENDERS)))
        elapsed = loop.time() - started
        used = cpu_seconds([broker.proc.pid]) - cpu0
    return count / elapsed, used / max(1, count)


async def _run(root: Path) -> list[Row]:
    (root / "on" / "store" / "config").mkdir(parents=True)
    (root / "on" / "store" / "config" / "acl.json").write_text(json.dumps(ACL))
    (root / "off").mkdir()
    on = await start_broker(
        root / "on", args=("--enable-proxy",), authenticationEnabled="true",
        authorizationEnabled="true",
        initAuthenticationUser=json.dumps({"username": ROOT.access_key,
                                           "password": ROOT.secret_key}))
    off = await start_broker(root / "off", args=("--enable-proxy",))
    try:
        for b, creds in ((on, ROOT), (off, None)):
            async with AdminClient(broker_addr=b.addr, credentials=creds) as admin:
                await admin.create_topic(TOPIC, queue_nums=4)
        results: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
        for _ in range(ROUNDS):
            results["off"].append(await phase(off, None))
            results["on"].append(await phase(on, USER))
    finally:
        await on.kill()
        await off.kill()
    rate = {k: statistics.median(r for r, _ in v) for k, v in results.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in results.items()}
    note = (f"median of {ROUNDS} alternating phases of {PHASE_SECONDS:g} s, {SENDERS} senders "
            f"x {BATCH} x {MSG_SIZE} B per SendMessage")
    return [
        Row(NAME, "gRPC sends, ACL on (signed, Normal user)", rate["on"], "msgs/s", note=note),
        Row(NAME, "gRPC sends, ACL off", rate["off"], "msgs/s"),
        Row(NAME, "  throughput on / off", rate["on"] / rate["off"], "", ">= 0.85"),
        Row(NAME, "  broker CPU per message on / off", cpu["on"] / cpu["off"], "",
            note=f"{cpu['on'] * 1e6:.0f} vs {cpu['off'] * 1e6:.0f} us/msg"),
    ]


def run() -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="auth-bench-") as tmp:
        return asyncio.run(_run(Path(tmp)))
