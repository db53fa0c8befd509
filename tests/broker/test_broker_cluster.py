"""A real mqnamesrv + mqbroker pair on 127.0.0.x, driven by the native client."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from mqcluster.client import AdminClient, BrokerError, Message, Producer, PullConsumer, PullStatus
from mqcluster.client.namesrv import NamesrvClient
from mqcluster.client.send_header import send_header_v1
from mqcluster.protocol.broker import BrokerResponseCode
from mqcluster.wire.frame import FrameDecoder, RemotingCommand, encode_frame
from mqcluster.wire.rpc import RpcClient
from mqcluster_testing.broker.procs import (
    BrokerProc,
    NamesrvProc,
    free_ip,
    start_broker,
    start_namesrv,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

ROUTE_WAIT = 20.0


class Cluster:
    def __init__(self, namesrv: NamesrvProc, broker: BrokerProc) -> None:
        self.namesrv = namesrv
        self.broker = broker


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Cluster]:
    tmp = tmp_path_factory.mktemp("cluster")
    ip = free_ip()
    namesrv = await start_namesrv(tmp, ip)
    broker: BrokerProc | None = None
    try:
        broker = await start_broker(
            tmp,
            ip,
            namesrvAddr=namesrv.addr,
            autoCreateTopicEnable="false",
            maxMessageSize=str(64 * 1024),
        )
        yield Cluster(namesrv, broker)
    finally:
        if broker is not None:
            await broker.kill()
        await namesrv.kill()


async def assert_routed(namesrv_addr: str, topic: str) -> None:
    """A topic change answers only after the broker registered it (as RocketMQ's
    updateAndCreateTopic does), so the name server must know the topic at once."""
    async with NamesrvClient(namesrv_addr) as ns:
        route = await ns.get_route(topic)
    assert route.queueDatas, f"the name server has no queues for {topic}"


async def test_broker_registers_with_namesrv(cluster: Cluster) -> None:
    async with NamesrvClient(cluster.namesrv.addr) as ns:
        deadline = asyncio.get_running_loop().time() + ROUTE_WAIT
        while True:
            info = await ns.get_cluster_info()
            if cluster.broker.addr in info.master_addrs("TestCluster"):
                break
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)


async def test_send_pull_round_trip_with_tags_keys_properties(cluster: Cluster) -> None:
    ns = cluster.namesrv.addr
    async with AdminClient(namesrv_addr=ns) as admin:
        created = await admin.create_topic("RoundTrip", queue_nums=2)
        assert created == [cluster.broker.addr]
    await assert_routed(ns, "RoundTrip")
    sent = []
    async with Producer("pg", namesrv_addr=ns, retries=0) as producer:
        for i in range(6):
            msg = Message(
                "RoundTrip",
                f"body-{i}".encode(),
                tags="TagA" if i % 2 == 0 else "TagB",
                keys=[f"key-{i}", "common"],
                properties={"idx": str(i)},
            )
            sent.append(await producer.send(msg))
        batch = [Message("RoundTrip", f"batch-{i}".encode(), tags="TagA") for i in range(5)]
        batch_results = await producer.send_batch(batch)
    # round robin over both queues
    assert {r.queue.queue_id for r in sent} == {0, 1}
    offsets = [r.queue_offset for r in batch_results]
    assert offsets == list(range(offsets[0], offsets[0] + 5))
    assert len({r.queue for r in batch_results}) == 1

    async with PullConsumer("cg", namesrv_addr=ns) as consumer:
        queues = await consumer.queues("RoundTrip")
        assert len(queues) == 2
        got = []
        for q in queues:
            res = await consumer.pull(q, 0, max_nums=64)
            assert res.status is PullStatus.FOUND
            got += res.messages
        by_key = {m.msg_id: m for m in got}
        for i, r in enumerate(sent):
            m = by_key[r.msg_id]
            assert m.body == f"body-{i}".encode()
            assert m.keys == [f"key-{i}", "common"]
            assert m.properties["idx"] == str(i)
            assert m.tags == ("TagA" if i % 2 == 0 else "TagB")
            assert m.queue_offset == r.queue_offset and m.queue_id == r.queue.queue_id
            assert m.offset_msg_id == r.offset_msg_id
        assert len(got) == 11

        tag_b = []
        for q in queues:
            res = await consumer.pull(q, 0, expression="TagB")
            tag_b += res.messages
        assert sorted(m.body for m in tag_b) == [b"body-1", b"body-3", b"body-5"]


async def test_offsets_and_receive(cluster: Cluster) -> None:
    ns = cluster.namesrv.addr
    addr = cluster.broker.addr
    async with AdminClient(broker_addr=addr) as admin:
        await admin.create_topic("Offsets", queue_nums=1)
        await admin.create_subscription_group("og")
    async with Producer(broker_addr=addr, retries=0) as producer:
        for i in range(10):
            await producer.send(Message("Offsets", f"m{i}".encode()))
    async with AdminClient(broker_addr=addr) as admin:
        assert await admin.max_offset("Offsets", 0) == 10
        assert await admin.min_offset("Offsets", 0) == 0
        assert await admin.consumer_offset("og", "Offsets", 0) is None
    await assert_routed(ns, "Offsets")
    async with PullConsumer("og", namesrv_addr=ns) as consumer:
        first = await consumer.receive("Offsets", max_nums=4)
        assert [m.body for m in first] == [b"m0", b"m1", b"m2", b"m3"]
        await consumer.commit()
    async with AdminClient(broker_addr=addr) as admin:
        assert await admin.consumer_offset("og", "Offsets", 0) == 4
    async with PullConsumer("og", broker_addr=addr) as consumer:
        rest = await consumer.receive("Offsets", max_nums=32)
        assert [m.body for m in rest] == [f"m{i}".encode() for i in range(4, 10)]
        assert await consumer.receive("Offsets") == []


async def test_long_poll_wakes_on_arrival(cluster: Cluster) -> None:
    addr = cluster.broker.addr
    async with AdminClient(broker_addr=addr) as admin:
        await admin.create_topic("LongPoll", queue_nums=1)
    async with (
        PullConsumer("lp", broker_addr=addr) as consumer,
        Producer(broker_addr=addr) as producer,
    ):
        (queue,) = await consumer.queues("LongPoll")
        waiting = asyncio.create_task(consumer.pull(queue, 0, suspend_ms=15000))
        await asyncio.sleep(0)  # let the pull go out before the send
        await producer.send(Message("LongPoll", b"wake"))
        res = await asyncio.wait_for(waiting, 10)
        if res.status is PullStatus.NO_NEW_MSG:  # the send beat the pull: nothing to wait for
            res = await consumer.pull(queue, 0)
        assert [m.body for m in res.messages] == [b"wake"]


async def test_admin_topics_and_runtime_info(cluster: Cluster) -> None:
    addr = cluster.broker.addr
    async with AdminClient(broker_addr=addr) as admin:
        await admin.create_topic("RuntimeInfo", queue_nums=1)
        async with Producer(broker_addr=addr) as producer:  # (not relying on other tests)
            await producer.send(Message("RuntimeInfo", b"x"))
        await admin.create_topic("ToDelete", queue_nums=3)
        topics = await admin.topic_configs()
        assert topics["ToDelete"].writeQueueNums == 3
        await admin.delete_topic("ToDelete")
        assert "ToDelete" not in await admin.topic_configs()
        info = await admin.runtime_info()
        assert info["brokerName"] == "broker-a"
        assert info["brokerAddr"] == addr
        assert int(info["commitLogMaxOffset"]) > 0


async def test_unknown_topic_and_oversized_messages_get_clear_errors(cluster: Cluster) -> None:
    addr = cluster.broker.addr
    async with Producer(broker_addr=addr, retries=0) as producer:
        with pytest.raises(BrokerError) as err:
            await producer.send(Message("NoSuchTopic", b"x"))
        assert err.value.code == BrokerResponseCode.TOPIC_NOT_EXIST
        assert err.value.code == 17
        assert "NoSuchTopic" in err.value.remark and "autoCreateTopicEnable" in err.value.remark

        async with AdminClient(broker_addr=addr) as admin:
            await admin.create_topic("Big", queue_nums=1)
        with pytest.raises(BrokerError) as err:
            await producer.send(Message("Big", b"x" * (64 * 1024 + 1)))
        assert err.value.code == BrokerResponseCode.MESSAGE_ILLEGAL
        assert err.value.code == 13
        assert "maxMessageSize" in err.value.remark
        # the broker keeps serving on the same connection
        ok = await producer.send(Message("Big", b"fits"))
        assert ok.queue_offset == 0


async def test_sends_arriving_together_are_answered_each_on_its_own(cluster: Cluster) -> None:
    """A pipelined burst is stored together; a bad request in it gets its own error and
    the others are stored, in order."""
    addr = cluster.broker.addr
    async with AdminClient(broker_addr=addr) as admin:
        await admin.create_topic("Burst", queue_nums=1)

    def send(opaque: int, body: bytes, topic: str | None = "Burst") -> bytes:
        header = send_header_v1("g", topic or "", 0, 1, 4, properties=f"UNIQ_KEY\x01u{opaque}")
        if topic is None:
            del header["topic"]
        cmd = RemotingCommand.request(10, header, body)
        cmd.opaque = opaque
        return encode_frame(cmd)

    host, port = addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(send(1, b"first") + send(2, b"x" * (64 * 1024 + 1)) + send(3, b"t", None)
                     + send(4, b"second"))
        await writer.drain()
        decoder = FrameDecoder()
        answers: dict[int, RemotingCommand] = {}
        async with asyncio.timeout(10):
            while len(answers) < 4:
                answers.update((a.opaque, a) for a in decoder.feed(await reader.read(65536)))
    finally:
        writer.close()
    assert [answers[i].code for i in (1, 2, 3, 4)] == [0, 13, 4, 0]
    assert "maxMessageSize" in (answers[2].remark or "")
    assert "topic" in (answers[3].remark or "")
    assert [answers[i].ext_fields["queueOffset"] for i in (1, 4)] == ["0", "1"]
    async with PullConsumer("burst-check", broker_addr=addr) as consumer:
        got = await consumer.receive("Burst", 10)
    assert [m.body for m in got] == [b"first", b"second"]


async def test_malformed_frames_close_only_that_connection(cluster: Cluster) -> None:
    host, port = cluster.broker.addr.rsplit(":", 1)
    rpc = RpcClient()
    try:
        healthy = await rpc.connection(cluster.broker.addr)
        for garbage in (
            struct.pack(">II", 10, 6) + b"{nope}",  # header not JSON
            struct.pack(">I", 2) + b"\x00\x00",  # shorter than its header length
            struct.pack(">I", 0x7FFFFFFF),  # oversized frame
        ):
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(garbage)
            await writer.drain()
            assert await asyncio.wait_for(reader.read(), 10) == b""  # closed by the broker
            writer.close()
        resp = await healthy.invoke(RemotingCommand.request(28))
        assert resp.code == 0 and not healthy.closed
        unknown = await healthy.invoke(RemotingCommand.request(9999))
        assert unknown.code == 3
        bad_header = await healthy.invoke(RemotingCommand.request(11, {"topic": "T"}))
        assert bad_header.code == 4 and "consumerGroup" in (bad_header.remark or "")
    finally:
        await rpc.close()


def sample(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and s.labels == labels:
                return float(s.value)
    raise AssertionError(f"no sample {name}{labels}")


async def test_metrics_and_health_endpoints(cluster: Cluster) -> None:
    async with AdminClient(broker_addr=cluster.broker.addr) as admin:
        await admin.create_topic("Metrics", queue_nums=1)
    async with Producer(broker_addr=cluster.broker.addr) as producer:
        await producer.send(Message("Metrics", b"12345"))
    async with PullConsumer("mg", broker_addr=cluster.broker.addr) as consumer:
        await consumer.receive("Metrics")
        await consumer.commit()
    async with aiohttp.ClientSession() as http:
        async with http.get(cluster.broker.metrics_url + "/health") as resp:
            assert resp.status == 200
            assert (await resp.json())["status"] == "UP"
        async with http.get(cluster.broker.metrics_url + "/metrics") as resp:
            assert resp.status == 200
            text = await resp.text()
    broker = {"broker": "broker-a", "cluster": "TestCluster"}
    assert sample(text, "rocketmq_messages_in_total", **broker, topic="Metrics") == 1
    assert sample(text, "rocketmq_throughput_in_total", **broker, topic="Metrics") == 5
    assert sample(text, "rocketmq_messages_out_total", **broker, topic="Metrics") == 1
    assert sample(text, "rocketmq_rpc_latency_put_seconds_count", **broker) >= 1
    assert sample(text, "rocketmq_commitlog_max_offset", **broker) > 0
    assert sample(text, "rocketmq_dispatch_behind_bytes", **broker) >= 0
    lag = sample(text, "rocketmq_consumer_lag_messages", **broker, group="mg", topic="Metrics")
    assert lag == 0


async def test_registers_with_every_namesrv_and_unregisters_on_sigterm(
    tmp_path: Path, cluster: Cluster
) -> None:
    second = await start_namesrv(tmp_path, cluster.broker.ip)
    broker: BrokerProc | None = None
    try:
        broker = await start_broker(
            tmp_path,
            cluster.broker.ip,
            namesrvAddr=f"{cluster.namesrv.addr};{second.addr}",
            brokerName="broker-t",
        )
        for addr in (cluster.namesrv.addr, second.addr):
            await wait_registered(addr, "broker-t")
        assert await broker.terminate() == 0
        for addr in (cluster.namesrv.addr, second.addr):
            async with NamesrvClient(addr) as ns:
                assert "broker-t" not in (await ns.get_cluster_info()).brokerAddrTable
    finally:
        if broker is not None:
            await broker.kill()
        await second.kill()
    store = tmp_path / "store"
    assert (store / "checkpoint").exists()
    assert not (store / "abort").exists(), "shutdown was not clean"


async def wait_registered(namesrv_addr: str, broker_name: str) -> None:
    async with NamesrvClient(namesrv_addr) as ns:
        deadline = asyncio.get_running_loop().time() + ROUTE_WAIT
        while broker_name not in (await ns.get_cluster_info()).brokerAddrTable:
            assert asyncio.get_running_loop().time() < deadline, f"{broker_name} not registered"
            await asyncio.sleep(0.05)


async def test_heartbeats_reach_a_restarted_namesrv(tmp_path: Path, cluster: Cluster) -> None:
    ns = await start_namesrv(tmp_path, cluster.broker.ip)
    broker: BrokerProc | None = None
    try:
        broker = await start_broker(
            tmp_path, cluster.broker.ip, namesrvAddr=ns.addr, brokerName="broker-h"
        )
        await wait_registered(ns.addr, "broker-h")
        await ns.kill()
        await ns.start("boot success")  # same address, empty route table
        await wait_registered(ns.addr, "broker-h")
    finally:
        if broker is not None:
            await broker.kill()
        await ns.kill()
