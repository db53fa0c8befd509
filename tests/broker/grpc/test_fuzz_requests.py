"""Property-based fuzzing of the gRPC requests the broker accepts: whatever the field
values, the answer is a status (never INTERNAL_SERVER_ERROR, never an exception), and a
message the broker stores reads back exactly as it was sent."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from mqcluster.broker.grpc import convert
from mqcluster.broker.messaging import properties as p
from mqcluster.store.topic_config import TopicConfig
from tests.broker.grpc.inprocess import InProcessBroker
from tests.broker.grpc.proto_strategies import TEXT, messages_of

INTERNAL = {pb.Code.INTERNAL_ERROR, pb.Code.INTERNAL_SERVER_ERROR}
FUZZ = settings(max_examples=120, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])

# method, request type, response type
UNARY_AND_STREAMING = [
    ("QueryRoute", spb.QueryRouteRequest, spb.QueryRouteResponse),
    ("Heartbeat", spb.HeartbeatRequest, spb.HeartbeatResponse),
    ("SendMessage", spb.SendMessageRequest, spb.SendMessageResponse),
    ("QueryAssignment", spb.QueryAssignmentRequest, spb.QueryAssignmentResponse),
    ("ReceiveMessage", spb.ReceiveMessageRequest, spb.ReceiveMessageResponse),
    ("AckMessage", spb.AckMessageRequest, spb.AckMessageResponse),
    ("ForwardMessageToDeadLetterQueue", spb.ForwardMessageToDeadLetterQueueRequest,
     spb.ForwardMessageToDeadLetterQueueResponse),
    ("PullMessage", spb.PullMessageRequest, spb.PullMessageResponse),
    ("UpdateOffset", spb.UpdateOffsetRequest, spb.UpdateOffsetResponse),
    ("GetOffset", spb.GetOffsetRequest, spb.GetOffsetResponse),
    ("QueryOffset", spb.QueryOffsetRequest, spb.QueryOffsetResponse),
    ("EndTransaction", spb.EndTransactionRequest, spb.EndTransactionResponse),
    ("NotifyClientTermination", spb.NotifyClientTerminationRequest,
     spb.NotifyClientTerminationResponse),
    ("ChangeInvisibleDuration", spb.ChangeInvisibleDurationRequest,
     spb.ChangeInvisibleDurationResponse),
    ("RecallMessage", spb.RecallMessageRequest, spb.RecallMessageResponse),
]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    b = InProcessBroker(tmp_path_factory.mktemp("fuzz") / "store")
    b.store.topics.put(TopicConfig("T", 2, 2))
    try:
        yield b
    finally:
        b.close()


def _statuses(responses: list[Any]) -> list[Any]:
    return [r.status for r in responses if r.HasField("status")]


def _assert_answered(responses: list[Any]) -> None:
    statuses = _statuses(responses)
    assert statuses, "no status in the answer"
    for s in statuses:
        assert s.code not in INTERNAL, s.message
        assert s.code in pb.Code.values(), s.code


@pytest.mark.parametrize(("method", "req_type", "resp_type"), UNARY_AND_STREAMING,
                         ids=[m for m, _, _ in UNARY_AND_STREAMING])
def test_any_request_gets_a_status_never_an_internal_error(
        broker: InProcessBroker, method: str, req_type: type[Message],
        resp_type: type[Message]) -> None:
    @FUZZ
    @given(messages_of(req_type))
    def check(req: Message) -> None:
        _assert_answered(broker.call(method, req, resp_type))

    check()


@pytest.mark.parametrize(("method", "req_type", "resp_type"), UNARY_AND_STREAMING[:6],
                         ids=[m for m, _, _ in UNARY_AND_STREAMING[:6]])
def test_random_bytes_get_a_status(broker: InProcessBroker, method: str,
                                   req_type: type[Message], resp_type: type[Message]) -> None:
    @settings(FUZZ, max_examples=60)
    @given(st.binary(max_size=64))
    def check(raw: bytes) -> None:
        _assert_answered(broker.call(method, raw, resp_type))

    check()


# ---- what is stored is what was sent ------------------------------------------------------

PROPERTY_TEXT = st.one_of(TEXT, st.sampled_from(["KEYS", "TAGS", "UNIQ_KEY", "__x", "k"]))


@st.composite
def sendable(draw: st.DrawFn) -> pb.Message:
    """Messages a producer could send to topic T, many of them acceptable."""
    m = pb.Message(body=draw(st.binary(min_size=0, max_size=32)))
    m.topic.name = draw(st.sampled_from(["T", "T", "T", "T\n", "rmq_sys_x"]))
    sp = m.system_properties
    sp.message_type = draw(st.sampled_from([pb.MessageType.NORMAL, pb.MessageType.FIFO,
                                            pb.MessageType.MESSAGE_TYPE_UNSPECIFIED]))
    if draw(st.booleans()):
        sp.tag = draw(PROPERTY_TEXT)
    sp.keys.extend(draw(st.lists(PROPERTY_TEXT, max_size=3)))
    if sp.message_type == pb.MessageType.FIFO or draw(st.booleans()):
        sp.message_group = draw(PROPERTY_TEXT)
    if draw(st.booleans()):
        sp.message_id = draw(PROPERTY_TEXT)
    m.user_properties.update(draw(st.dictionaries(PROPERTY_TEXT, PROPERTY_TEXT, max_size=4)))
    return m


def _ends(broker: InProcessBroker) -> list[int]:
    return [broker.store.max_offset("T", q) for q in range(2)]


def _stored(broker: InProcessBroker, before: list[int], offset: int,
            message_id: str) -> pb.Message:
    """The one message the send added (on whichever queue grew)."""
    (queue,) = [q for q, (a, b) in enumerate(zip(before, _ends(broker), strict=True)) if b > a]
    (stored,) = broker.store.get_messages("T", queue, offset, 1).messages
    assert stored.properties.get(p.PROPERTY_UNIQ_KEY) == message_id
    return convert.stored_message(stored)


@FUZZ
@given(msg=sendable())
def test_a_stored_message_reads_back_as_it_was_sent(broker: InProcessBroker,
                                                      msg: pb.Message) -> None:
    before = _ends(broker)
    (resp,) = broker.call("SendMessage", spb.SendMessageRequest(messages=[msg]),
                          spb.SendMessageResponse)
    _assert_answered([resp])
    (entry,) = resp.entries
    if entry.status.code != pb.Code.OK:
        assert _ends(broker) == before
        return
    assert msg.topic.name == "T"
    got = _stored(broker, before, entry.offset, entry.message_id)
    sent = msg.system_properties
    assert got.body == msg.body
    assert dict(got.user_properties) == dict(msg.user_properties)
    assert list(got.system_properties.keys) == list(sent.keys)
    assert got.system_properties.tag == sent.tag
    assert got.system_properties.message_group == sent.message_group
    assert got.system_properties.message_type == (
        pb.MessageType.FIFO if sent.HasField("message_group") else pb.MessageType.NORMAL)
    if sent.message_id:
        assert got.system_properties.message_id == sent.message_id == entry.message_id
