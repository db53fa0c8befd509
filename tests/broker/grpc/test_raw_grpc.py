"""Raw gRPC calls: malformed, oversized and invalid requests get clear statuses."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from google.protobuf.message import Message
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc

from tests.broker.grpc.harness import BrokerThread

PREFIX = "/apache.rocketmq.v2.MessagingService/"
METADATA = (("x-mq-client-id", "raw-test-client"),)


@pytest.fixture
def channel(broker: BrokerThread) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(broker.address, options=[
            ("grpc.max_send_message_length", -1)]) as ch:
        yield ch


@pytest.fixture
def stub(channel: grpc.Channel) -> service_pb2_grpc.MessagingServiceStub:
    return service_pb2_grpc.MessagingServiceStub(channel)


def raw_call(channel: grpc.Channel, method: str, payload: bytes) -> bytes:
    fn = channel.unary_unary(PREFIX + method, request_serializer=None,
                             response_deserializer=None)
    return bytes(fn(payload, timeout=10, metadata=METADATA))


def message(topic: str, body: bytes, **sp: object) -> pb.Message:
    m = pb.Message(body=body)
    m.topic.name = topic
    m.system_properties.message_id = str(sp.pop("message_id", ""))
    m.system_properties.message_type = pb.MessageType.NORMAL
    for k, v in sp.items():
        setattr(m.system_properties, k, v)
    return m


def send(stub: service_pb2_grpc.MessagingServiceStub, *msgs: pb.Message) -> spb.SendMessageResponse:
    resp: spb.SendMessageResponse = stub.SendMessage(
        spb.SendMessageRequest(messages=list(msgs)), timeout=10, metadata=METADATA)
    return resp


def code_name(resp: Message) -> str:
    return str(pb.Code.Name(resp.status.code))


def test_garbage_and_truncated_payloads(channel: grpc.Channel,
                                        stub: service_pb2_grpc.MessagingServiceStub) -> None:
    garbage = b"\xff\xfe\x00garbage\x12\x99"
    resp = spb.SendMessageResponse.FromString(raw_call(channel, "SendMessage", garbage))
    assert code_name(resp) == "BAD_REQUEST"
    assert "malformed SendMessageRequest" in resp.status.message
    valid = spb.SendMessageRequest(messages=[message("RawTopic", b"hello")]).SerializeToString()
    for cut in (1, len(valid) // 2, len(valid) - 1):
        resp = spb.SendMessageResponse.FromString(raw_call(channel, "SendMessage", valid[:cut]))
        assert code_name(resp) == "BAD_REQUEST", cut
    resp = spb.QueryRouteResponse.FromString(raw_call(channel, "QueryRoute", garbage))
    assert code_name(resp) == "BAD_REQUEST"
    resp = spb.AckMessageResponse.FromString(raw_call(channel, "AckMessage", b"\x0a\x05ab"))
    assert code_name(resp) == "BAD_REQUEST"
    assert send(stub, message("RawTopic", b"still serving")).status.code == pb.Code.OK


def test_oversized_messages(stub: service_pb2_grpc.MessagingServiceStub) -> None:
    resp = send(stub, message("RawTopic", b"x" * (4 * 1024 * 1024 + 1)))
    assert code_name(resp) == "MESSAGE_BODY_TOO_LARGE"
    assert "maxMessageSize" in resp.status.message
    with pytest.raises(grpc.RpcError) as err:
        send(stub, message("RawTopic", b"x" * (40 * 1024 * 1024)))
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert send(stub, message("RawTopic", b"fine")).status.code == pb.Code.OK


def test_invalid_messages(stub: service_pb2_grpc.MessagingServiceStub) -> None:
    assert code_name(send(stub, message("RawTopic", b""))) == "MESSAGE_BODY_EMPTY"
    assert code_name(send(stub, message("bad topic!", b"x"))) == "ILLEGAL_TOPIC"
    assert code_name(stub.SendMessage(spb.SendMessageRequest(), timeout=5)) == "BAD_REQUEST"
    corrupted = message("RawTopic", b"payload")
    corrupted.system_properties.body_digest.type = pb.DigestType.CRC32
    corrupted.system_properties.body_digest.checksum = "00000000"
    assert code_name(send(stub, corrupted)) == "MESSAGE_CORRUPTED"
    bad_gzip = message("RawTopic", b"not gzip", body_encoding=pb.Encoding.GZIP)
    assert code_name(send(stub, bad_gzip)) == "MESSAGE_CORRUPTED"
    fifo_without_group = message("RawTopic", b"x", message_type=pb.MessageType.FIFO)
    assert code_name(send(stub, fifo_without_group)) == "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE"
    future = message("RawTopic", b"x", message_type=pb.MessageType.DELAY)
    future.system_properties.delivery_timestamp.seconds = 2**62  # neither seconds nor ms
    assert code_name(send(stub, future)) == "ILLEGAL_DELIVERY_TIME"


def test_batch_send_reports_each_entry(stub: service_pb2_grpc.MessagingServiceStub,
                                       broker: BrokerThread) -> None:
    resp = send(stub, message("RawTopic", b"a", message_id="ID-A"), message("RawTopic", b""),
                message("RawTopic", b"c"))
    assert code_name(resp) == "MULTIPLE_RESULTS"
    assert [code_name(e) for e in resp.entries] == ["OK", "MESSAGE_BODY_EMPTY", "OK"]
    assert resp.entries[0].message_id == "ID-A"
    assert len(resp.entries[2].message_id) == 34
    assert broker.ctx is not None
    metrics = broker.ctx.metrics
    sample = metrics.registry.get_sample_value
    stored = sample("rocketmq_messages_in_total", {**metrics.labels, "topic": "RawTopic"})
    refused = sample("rocketmq_put_errors_total",
                     {**metrics.labels, "status": "MESSAGE_BODY_EMPTY"})
    assert (stored, refused) == (2, 1)
    ok = send(stub, message("RawTopic", b"1"), message("RawTopic", b"2"))
    assert code_name(ok) == "OK" and [e.offset for e in ok.entries] == [
        ok.entries[0].offset, ok.entries[0].offset + 1]


def test_topic_not_found_without_auto_create(tmp_path: object) -> None:
    from pathlib import Path

    from tests.broker.grpc.conftest import broker_config

    b = BrokerThread(Path(str(tmp_path)) / "s", broker_config(autoCreateTopicEnable=False))
    b.start()
    try:
        with grpc.insecure_channel(b.address) as ch:
            stub = service_pb2_grpc.MessagingServiceStub(ch)
            req = spb.QueryRouteRequest()
            req.topic.name = "Missing"
            assert code_name(stub.QueryRoute(req, timeout=5)) == "TOPIC_NOT_FOUND"
            assert code_name(send(stub, message("Missing", b"x"))) == "TOPIC_NOT_FOUND"
    finally:
        b.stop()


def receive(stub: service_pb2_grpc.MessagingServiceStub, topic: str, group: str = "RawGroup",
            queue_id: int = 0, *, batch_size: int = 8, invisible_s: int = 5,
            expression: str | None = None,
            sql: str | None = None) -> list[spb.ReceiveMessageResponse]:
    req = spb.ReceiveMessageRequest(batch_size=batch_size)
    req.group.name = group
    req.message_queue.topic.name = topic
    req.message_queue.id = queue_id
    req.invisible_duration.seconds = invisible_s
    req.long_polling_timeout.seconds = 0
    if expression is not None:
        req.filter_expression.expression = expression
    if sql is not None:
        req.filter_expression.type = pb.FilterType.SQL
        req.filter_expression.expression = sql
    return list(stub.ReceiveMessage(req, timeout=10, metadata=METADATA))


def statuses(responses: list[spb.ReceiveMessageResponse]) -> list[str]:
    return [pb.Code.Name(r.status.code) for r in responses if r.HasField("status")]


def test_receive_errors_and_ack(stub: service_pb2_grpc.MessagingServiceStub) -> None:
    send(stub, message("RecvTopic", b"m1", tag="t1"))
    assert statuses(receive(stub, "RecvTopic", sql="a > 1")) == ["UNSUPPORTED"]
    assert statuses(receive(stub, "RecvTopic", expression="a ||")) == ["ILLEGAL_FILTER_EXPRESSION"]
    assert statuses(receive(stub, "RecvTopic", queue_id=7)) == ["BAD_REQUEST"]
    assert statuses(receive(stub, "RecvTopic", invisible_s=0)) == ["ILLEGAL_INVISIBLE_TIME"]
    assert statuses(receive(stub, "RecvTopic", group="bad group")) == ["ILLEGAL_CONSUMER_GROUP"]
    assert statuses(receive(stub, "NoSuchTopic")) == ["TOPIC_NOT_FOUND"]
    got = receive(stub, "RecvTopic")
    assert statuses(got) == ["OK"]
    msgs = [r.message for r in got if r.HasField("message")]
    assert [m.body for m in msgs] == [b"m1"]
    sp = msgs[0].system_properties
    assert sp.tag == "t1" and sp.delivery_attempt == 1 and sp.receipt_handle
    assert sp.body_digest.type == pb.DigestType.CRC32
    assert sp.HasField("store_timestamp") and sp.store_timestamp.seconds > 1_600_000_000
    assert sp.store_host and sp.message_id and sp.queue_offset == 0
    ack = spb.AckMessageRequest()
    ack.group.name = "RawGroup"
    ack.topic.name = "RecvTopic"
    ack.entries.add(message_id=sp.message_id, receipt_handle=sp.receipt_handle)
    ack.entries.add(message_id="x", receipt_handle="corrupted~handle")
    resp = stub.AckMessage(ack, timeout=5)
    assert [code_name(e) for e in resp.entries] == ["OK", "INVALID_RECEIPT_HANDLE"]
    assert code_name(resp) == "MULTIPLE_RESULTS"
    assert statuses(receive(stub, "RecvTopic")) == ["MESSAGE_NOT_FOUND"]


def test_offsets_and_pull(stub: service_pb2_grpc.MessagingServiceStub) -> None:
    send(stub, message("PullTopic", b"p0"), message("PullTopic", b"p1"))
    mq = pb.MessageQueue(id=0)
    mq.topic.name = "PullTopic"
    group = pb.Resource(name="PullGroup")
    got = stub.GetOffset(spb.GetOffsetRequest(group=group, message_queue=mq), timeout=5)
    assert code_name(got) == "OFFSET_NOT_FOUND"
    assert code_name(stub.UpdateOffset(
        spb.UpdateOffsetRequest(group=group, message_queue=mq, offset=1), timeout=5)) == "OK"
    got = stub.GetOffset(spb.GetOffsetRequest(group=group, message_queue=mq), timeout=5)
    assert (code_name(got), got.offset) == ("OK", 1)
    end = stub.QueryOffset(spb.QueryOffsetRequest(
        message_queue=mq, query_offset_policy=pb.QueryOffsetPolicy.END), timeout=5)
    assert end.offset == 2
    pulled = list(stub.PullMessage(spb.PullMessageRequest(
        group=group, message_queue=mq, offset=1, batch_size=10), timeout=5))
    assert [r.message.body for r in pulled if r.HasField("message")] == [b"p1"]
    assert [r.next_offset for r in pulled if r.HasField("next_offset")] == [2]


def test_end_transaction_and_telemetry_errors(
        stub: service_pb2_grpc.MessagingServiceStub) -> None:
    req = spb.EndTransactionRequest(transaction_id="nope", message_id="m",
                                    resolution=pb.TransactionResolution.COMMIT)
    req.topic.name = "RawTopic"
    assert code_name(stub.EndTransaction(req, timeout=5)) == "INVALID_TRANSACTION_ID"
    replies = list(stub.Telemetry(iter([spb.TelemetryCommand()]), timeout=5))
    assert [pb.Code.Name(r.status.code) for r in replies] == ["CLIENT_ID_REQUIRED"]


def test_telemetry_settings_handshake(stub: service_pb2_grpc.MessagingServiceStub) -> None:
    cmd = spb.TelemetryCommand()
    cmd.settings.client_type = pb.ClientType.PRODUCER
    cmd.settings.publishing.topics.add(name="RawTopic")
    replies = stub.Telemetry(iter([cmd]), timeout=5, metadata=METADATA)
    first = next(iter(replies))
    assert first.status.code == pb.Code.OK
    assert first.settings.publishing.max_body_size == 4 * 1024 * 1024
    assert first.settings.backoff_policy.max_attempts == 3
    replies.cancel()


def test_unknown_method_is_unimplemented(channel: grpc.Channel) -> None:
    with pytest.raises(grpc.RpcError) as err:
        channel.unary_unary("/apache.rocketmq.v2.MessagingService/NoSuchRpc")(b"", timeout=5)
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_route_and_assignment(stub: service_pb2_grpc.MessagingServiceStub,
                              broker: BrokerThread) -> None:
    req = spb.QueryRouteRequest()
    req.topic.name = "RouteTopic"
    host, port = broker.address.split(":")
    req.endpoints.addresses.add(host=host, port=int(port))
    route = stub.QueryRoute(req, timeout=5)
    assert code_name(route) == "OK"
    assert [q.id for q in route.message_queues] == [0]
    q = route.message_queues[0]
    assert q.permission == pb.Permission.READ_WRITE and q.broker.name == "broker-a"
    assert [(a.host, a.port) for a in q.broker.endpoints.addresses] == [(host, int(port))]
    assert set(q.accept_message_types) == {pb.MessageType.NORMAL, pb.MessageType.FIFO,
                                           pb.MessageType.DELAY, pb.MessageType.TRANSACTION}
    areq = spb.QueryAssignmentRequest()
    areq.topic.name = "RouteTopic"
    areq.group.name = "RouteGroup"
    areq.endpoints.CopyFrom(req.endpoints)
    assignment = stub.QueryAssignment(areq, timeout=5)
    assert [a.message_queue.id for a in assignment.assignments] == [-1]


def test_telemetry_survives_a_garbage_frame(channel: grpc.Channel) -> None:
    settings = spb.TelemetryCommand()
    settings.settings.client_type = pb.ClientType.SIMPLE_CONSUMER
    settings.settings.subscription.group.name = "TeleGroup"
    stream = channel.stream_stream(PREFIX + "Telemetry", request_serializer=None,
                                   response_deserializer=spb.TelemetryCommand.FromString)
    replies = stream(iter([b"\xff\xff\xff", settings.SerializeToString()]), timeout=5,
                     metadata=METADATA)
    got = list(replies)
    assert [pb.Code.Name(r.status.code) for r in got] == ["BAD_REQUEST", "OK"]
    assert got[1].settings.subscription.fifo is False
    assert got[1].settings.backoff_policy.max_attempts == 17
    assert got[1].settings.subscription.receive_batch_size == 32
