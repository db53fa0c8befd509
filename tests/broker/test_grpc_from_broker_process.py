"""``mqbroker --enable-proxy`` serves gRPC; the official and native clients interoperate."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rocketmq import ClientConfiguration, Credentials
from rocketmq import Message as GrpcMessage
from rocketmq import Producer as GrpcProducer

from mqcluster.client import AdminClient, PullConsumer
from mqcluster_testing.broker.procs import start_broker


def send_with_official_client(endpoint: str, topic: str, bodies: list[bytes]) -> list[str]:
    producer = GrpcProducer(
        ClientConfiguration(endpoint, Credentials(), request_timeout=10), (topic,)
    )
    producer.startup()
    try:
        ids = []
        for body in bodies:
            msg = GrpcMessage()
            msg.topic = topic
            msg.body = body
            msg.tag = "FromGrpc"
            ids.append(producer.send(msg).message_id)
        return ids
    finally:
        producer.shutdown()


async def test_enable_proxy_starts_grpc_endpoint(tmp_path: Path) -> None:
    broker = await start_broker(tmp_path, args=("--enable-proxy",))
    try:
        async with AdminClient(broker_addr=broker.addr) as admin:
            await admin.create_topic("Interop", queue_nums=1)
            info = await admin.runtime_info()
        endpoint = f"{broker.ip}:{broker.props['grpcServerPort']}"
        assert info["grpcServerAddr"] == endpoint
        bodies = [f"grpc-{i}".encode() for i in range(3)]
        ids = await asyncio.to_thread(send_with_official_client, endpoint, "Interop", bodies)
        async with PullConsumer("interop", broker_addr=broker.addr) as consumer:
            got = await consumer.receive("Interop")
        assert [m.body for m in got] == bodies
        assert [m.msg_id for m in got] == ids
        assert {m.tags for m in got} == {"FromGrpc"}
    finally:
        await broker.kill()
