"""gRPC requests: names by the shared rules, write permission, delivery times."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from mqcluster.store.topic_config import PERM_READ, PERM_WRITE, TopicConfig
from tests.broker.grpc.inprocess import InProcessBroker

TOPIC = "T"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    b = InProcessBroker(tmp_path / "store")
    b.store.topics.put(TopicConfig(TOPIC, 2, 2))
    try:
        yield b
    finally:
        b.close()


def message(body: bytes = b"body", topic: str = TOPIC) -> pb.Message:
    m = pb.Message(body=body)
    m.topic.name = topic
    m.system_properties.message_type = pb.MessageType.NORMAL
    return m


def send(b: InProcessBroker, *msgs: pb.Message) -> spb.SendMessageResponse:
    (resp,) = b.call("SendMessage", spb.SendMessageRequest(messages=list(msgs)),
                     spb.SendMessageResponse)
    return resp


def code(resp: spb.SendMessageResponse) -> str:
    return str(pb.Code.Name(resp.status.code))


def stored_count(b: InProcessBroker) -> int:
    return sum(b.store.max_offset(TOPIC, q) for q in range(2))


# ---- names: a separator can no longer turn one message into another ------------------


def _with_property(m: pb.Message) -> pb.Message:
    m.user_properties["k"] = "v\x02KEYS\x01injected\x02__SHARDINGKEY\x01g"
    return m


def _with_property_key(m: pb.Message) -> pb.Message:
    m.user_properties["a\x01b"] = "v"
    return m


def _with_key(m: pb.Message) -> pb.Message:
    m.system_properties.keys.append("k\x02MSG_GROUP\x01g")
    return m


def _with_tag(m: pb.Message) -> pb.Message:
    m.system_properties.tag = "t\x02KEYS\x01k"
    return m


def _with_group(m: pb.Message) -> pb.Message:
    m.system_properties.message_type = pb.MessageType.FIFO
    m.system_properties.message_group = "g\x01x"
    return m


def _with_message_id(m: pb.Message) -> pb.Message:
    m.system_properties.message_id = "ID\x02KEYS\x01k"
    return m


def _with_space_in_key(m: pb.Message) -> pb.Message:
    m.system_properties.keys.append("two keys")
    return m


def _with_reserved_property(m: pb.Message) -> pb.Message:
    m.user_properties["__hidden"] = "v"
    return m


@pytest.mark.parametrize(("build", "expected"), [
    (_with_property, "ILLEGAL_MESSAGE_PROPERTY_KEY"),
    (_with_property_key, "ILLEGAL_MESSAGE_PROPERTY_KEY"),
    (_with_key, "ILLEGAL_MESSAGE_KEY"),
    (_with_space_in_key, "ILLEGAL_MESSAGE_KEY"),
    (_with_tag, "ILLEGAL_MESSAGE_TAG"),
    (_with_group, "ILLEGAL_MESSAGE_GROUP"),
    (_with_message_id, "ILLEGAL_MESSAGE_ID"),
    (_with_reserved_property, "ILLEGAL_MESSAGE_PROPERTY_KEY"),
])
def test_a_name_with_a_control_character_is_refused_and_nothing_is_stored(
        broker: InProcessBroker, build: object, expected: str) -> None:
    resp = send(broker, build(message()))  # type: ignore[operator]
    assert code(resp) == expected, resp.status.message
    assert stored_count(broker) == 0


def test_a_group_name_with_a_trailing_newline_is_refused(broker: InProcessBroker) -> None:
    req = spb.QueryAssignmentRequest()
    req.topic.name = TOPIC
    req.group.name = "G\n"
    (resp,) = broker.call("QueryAssignment", req, spb.QueryAssignmentResponse)
    assert pb.Code.Name(resp.status.code) == "ILLEGAL_CONSUMER_GROUP"
    assert broker.store.subscriptions.get("G\n") is None


# ---- write permission ------------------------------------------------------------------


def _route(b: InProcessBroker) -> list[int]:
    req = spb.QueryRouteRequest()
    req.topic.name = TOPIC
    (resp,) = b.call("QueryRoute", req, spb.QueryRouteResponse)
    assert resp.status.code == pb.Code.OK, resp.status.message
    return [mq.permission for mq in resp.message_queues]


def _assignment(b: InProcessBroker) -> list[int]:
    req = spb.QueryAssignmentRequest()
    req.topic.name = TOPIC
    req.group.name = "G"
    (resp,) = b.call("QueryAssignment", req, spb.QueryAssignmentResponse)
    assert resp.status.code == pb.Code.OK, resp.status.message
    return [a.message_queue.permission for a in resp.assignments]


def test_a_read_only_broker_refuses_grpc_sends_and_routes_say_read(
        broker: InProcessBroker) -> None:
    assert _route(broker) == [pb.Permission.READ_WRITE] * 2
    broker.broker_permission = PERM_READ  # brokerPermission=4
    resp = send(broker, message())
    assert code(resp) == "FORBIDDEN"
    assert "brokerPermission" in resp.status.message
    assert stored_count(broker) == 0
    assert _route(broker) == [pb.Permission.READ] * 2
    assert _assignment(broker) == [pb.Permission.READ]
    broker.broker_permission = PERM_READ | PERM_WRITE
    assert code(send(broker, message())) == "OK"


def test_a_read_only_topic_routes_read_and_refuses_sends(broker: InProcessBroker) -> None:
    broker.store.topics.put(TopicConfig(TOPIC, 2, 2, perm=PERM_READ))
    assert code(send(broker, message())) == "FORBIDDEN"
    assert _route(broker) == [pb.Permission.READ] * 2


def test_a_write_only_broker_hands_out_no_assignment(broker: InProcessBroker) -> None:
    broker.broker_permission = PERM_WRITE
    assert _route(broker) == [pb.Permission.WRITE] * 2
    assert _assignment(broker) == []


# ---- delivery time ----------------------------------------------------------------------


@pytest.mark.parametrize("seconds", [253_402_300_800, 500_000_000_000, 946_684_799_999])
def test_a_delivery_time_past_year_9999_is_refused_not_read_as_milliseconds(
        broker: InProcessBroker, seconds: int) -> None:
    m = message()
    m.system_properties.message_type = pb.MessageType.DELAY
    m.system_properties.delivery_timestamp.seconds = seconds
    resp = send(broker, m)
    assert code(resp) == "ILLEGAL_DELIVERY_TIME", resp.status.message
    assert "9999" in resp.status.message
    assert stored_count(broker) == 0


def test_the_official_clients_milliseconds_in_seconds_still_delay(
        broker: InProcessBroker) -> None:
    m = message()
    m.system_properties.message_type = pb.MessageType.DELAY
    m.system_properties.delivery_timestamp.seconds = broker.clock.now_ms() + 60_000
    resp = send(broker, m)
    assert code(resp) == "OK", resp.status.message
    assert stored_count(broker) == 0  # (held on the timer topic, not yet on T)


async def test_the_endpoint_reads_brokerpermission_from_the_broker_config_on_every_send(
        tmp_path: Path) -> None:
    import grpc

    from mqcluster.broker.config import BrokerConfig
    from mqcluster.broker.grpc import start_grpc_server
    from mqcluster.store import MessageStore, StoreConfig
    from tests.broker.grpc.harness import Host, loopback_host

    store = MessageStore(StoreConfig(storePathRootDir=str(tmp_path / "s"), brokerName="b"))
    await store.start()
    host = Host(BrokerConfig(brokerName="b", brokerPermission=4,  # type: ignore[arg-type]
                             storePathRootDir=str(tmp_path / "s")), store, broker_name="b")
    ip = loopback_host()
    endpoint = await start_grpc_server(host, ip, 0)
    try:
        async with grpc.aio.insecure_channel(f"{ip}:{endpoint.port}") as channel:
            call = channel.unary_unary(
                "/apache.rocketmq.v2.MessagingService/SendMessage",
                request_serializer=spb.SendMessageRequest.SerializeToString,
                response_deserializer=spb.SendMessageResponse.FromString)
            resp = await call(spb.SendMessageRequest(messages=[message()]), timeout=10)
            assert code(resp) == "FORBIDDEN"
            host.config = host.config.model_copy(update={"brokerPermission": 6})
            resp = await call(spb.SendMessageRequest(messages=[message()]), timeout=10)
            assert code(resp) == "OK", resp.status.message
    finally:
        await endpoint.stop(0)
        await store.shutdown()
