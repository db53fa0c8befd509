from __future__ import annotations

import pytest

from mqcluster.client import (
    AdminClient,
    BrokerError,
    ClientError,
    Message,
    MessageQueue,
    Producer,
    PullConsumer,
    PullStatus,
)
from mqcluster.client.route import NoRouteError, route_from_namesrv
from mqcluster.protocol.broker import BrokerResponseCode
from mqcluster.protocol.messages import encode_properties
from mqcluster.protocol.namesrv import BrokerData, QueueData, TopicRouteData
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.rpc import RpcClient
from tests.client.conftest import BrokerFactory


def test_route_from_namesrv_uses_masters_and_permissions() -> None:
    data = TopicRouteData(
        queueDatas=[
            QueueData(brokerName="b", readQueueNums=2, writeQueueNums=2, perm=6),
            QueueData(brokerName="a", readQueueNums=1, writeQueueNums=3, perm=2),
            QueueData(brokerName="c", readQueueNums=1, writeQueueNums=1, perm=6),
        ],
        brokerDatas=[
            BrokerData(cluster="x", brokerName="a", brokerAddrs={0: "h:1", 1: "h:2"}),
            BrokerData(cluster="x", brokerName="b", brokerAddrs={0: "h:3"}),
            BrokerData(cluster="x", brokerName="c", brokerAddrs={1: "h:4"}),
        ],
    )
    route = route_from_namesrv("T", data)
    assert route.brokers == {"a": "h:1", "b": "h:3"}
    assert [(q.broker_name, q.queue_id) for q in route.write_queues] == [
        ("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1),
    ]  # fmt: skip
    assert [(q.broker_name, q.queue_id) for q in route.read_queues] == [("b", 0), ("b", 1)]
    with pytest.raises(NoRouteError):
        route.addr_of(MessageQueue("T", "c", 0))


async def test_round_robin_and_auto_create(broker_factory: BrokerFactory) -> None:
    server = await broker_factory(defaultTopicQueueNums="8")
    addr = server.context.addresses.broker
    async with Producer(broker_addr=addr, default_queue_nums=4) as producer:
        results = [await producer.send(Message("Auto", f"{i}".encode())) for i in range(8)]
    assert [r.queue.queue_id for r in results] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert [r.queue_offset for r in results] == [0, 0, 0, 0, 1, 1, 1, 1]
    async with AdminClient(broker_addr=addr) as admin:
        topics = await admin.topic_configs()
    assert topics["Auto"].writeQueueNums == 4


async def test_receive_filters_by_tag_and_commits(broker_factory: BrokerFactory) -> None:
    server = await broker_factory()
    addr = server.context.addresses.broker
    async with AdminClient(broker_addr=addr) as admin:
        await admin.create_topic("Tags", queue_nums=3)
    async with Producer(broker_addr=addr) as producer:
        for i in range(9):
            await producer.send(
                Message("Tags", f"{i}".encode(), tags="even" if i % 2 == 0 else "odd")
            )
    got = []
    async with PullConsumer("g", broker_addr=addr) as consumer:
        while batch := await consumer.receive("Tags", expression="odd"):
            got += batch
        await consumer.commit()
        committed = {
            q.queue_id: await consumer.committed_offset(q) for q in await consumer.queues("Tags")
        }
    assert sorted(m.body for m in got) == [b"1", b"3", b"5", b"7"]
    assert committed == {0: 3, 1: 3, 2: 3}


async def test_batch_rules(broker_factory: BrokerFactory) -> None:
    server = await broker_factory()
    addr = server.context.addresses.broker
    async with Producer(broker_addr=addr) as producer:
        with pytest.raises(ClientError, match="one topic"):
            await producer.send_batch([Message("A", b"1"), Message("B", b"2")])
        assert await producer.send_batch([]) == []
        results = await producer.send_batch([Message("A", b"1"), Message("A", b"2")])
    assert [r.queue_offset for r in results] == [0, 1]
    assert len({r.offset_msg_id for r in results}) == 2


async def test_slave_refuses_writes(broker_factory: BrokerFactory) -> None:
    server = await broker_factory(brokerRole="SLAVE", brokerId="1")
    async with Producer(broker_addr=server.context.addresses.broker, retries=0) as producer:
        with pytest.raises(BrokerError) as err:
            await producer.send(Message("T", b"x"))
    assert err.value.code == BrokerResponseCode.SERVICE_NOT_AVAILABLE
    assert "slave" in err.value.remark


async def test_admin_rejects_bad_queue_numbers(broker_factory: BrokerFactory) -> None:
    server = await broker_factory()
    async with AdminClient(broker_addr=server.context.addresses.broker) as admin:
        with pytest.raises(BrokerError) as err:
            await admin.create_topic("T", queue_nums=0)
        assert "readQueueNums" in err.value.remark
        with pytest.raises(BrokerError) as err:
            await admin.create_topic("bad topic!", queue_nums=1)
        assert err.value.code == BrokerResponseCode.MESSAGE_ILLEGAL


async def test_unreachable_broker_raises_client_error(broker_factory: BrokerFactory) -> None:
    server = await broker_factory()
    addr = server.context.addresses.broker
    await server.stop()
    async with Producer(broker_addr=addr, retries=1, timeout=1) as producer:
        with pytest.raises(ClientError):
            await producer.send(Message("T", b"x"))


async def test_pull_past_the_end_and_oversized_properties(broker_factory: BrokerFactory) -> None:
    server = await broker_factory()
    addr = server.context.addresses.broker
    async with AdminClient(broker_addr=addr) as admin:
        await admin.create_topic("Edge", queue_nums=1)
    async with Producer(broker_addr=addr, retries=0) as producer:
        await producer.send(Message("Edge", b"only"))
        with pytest.raises(BrokerError) as err:
            await producer.send(Message("Edge", b"x", properties={"big": "p" * 40000}))
        assert err.value.code == BrokerResponseCode.MESSAGE_ILLEGAL
    async with PullConsumer("edge", broker_addr=addr) as consumer:
        (queue,) = await consumer.queues("Edge")
        at_end = await consumer.pull(queue, 1)
        assert at_end.status is PullStatus.NO_NEW_MSG and at_end.next_begin_offset == 1
        moved = await consumer.pull(queue, 50)
        assert moved.status is PullStatus.OFFSET_ILLEGAL
        assert moved.max_offset == 1
        assert await consumer.api.search_offset(addr, "Edge", 0, 0) == 0
        assert await consumer.api.search_offset(addr, "Edge", 0, 2**62) == 1


async def test_send_message_v1_headers(broker_factory: BrokerFactory) -> None:
    server = await broker_factory()
    addr = server.context.addresses.broker
    rpc = RpcClient()
    try:
        header = {
            "producerGroup": "pg",
            "topic": "V1",
            "queueId": "0",
            "properties": encode_properties({"TAGS": "t1", "KEYS": "a b", "p": "v"}),
        }
        resp = await rpc.invoke(addr, RemotingCommand.request(10, header, b"v1-body"))
        assert resp.code == 0, resp.remark
        assert resp.ext_fields["queueId"] == "0" and resp.ext_fields["queueOffset"] == "0"
    finally:
        await rpc.close()
    async with PullConsumer("g", broker_addr=addr) as consumer:
        (msg,) = await consumer.receive("V1")
    assert (msg.body, msg.tags, msg.keys, msg.properties) == (
        b"v1-body",
        "t1",
        ["a", "b"],
        {"p": "v"},
    )
    assert msg.offset_msg_id == resp.ext_fields["msgId"]
