from __future__ import annotations

from pathlib import Path

import pytest

from mqcluster.broker.grpc.send_status import send_error
from mqcluster.broker.messaging.clock import ManualClock
from mqcluster.broker.messaging.config import MessagingConfig
from mqcluster.broker.messaging.errors import Code
from mqcluster.broker.messaging.kinds import MessageKind
from mqcluster.broker.messaging.receipt import ReceiptHandle
from mqcluster.broker.messaging.send import OutgoingMessage
from mqcluster.broker.messaging.service import MessagingService
from mqcluster.store.message import PutStatus
from mqcluster.store.topic_config import TopicConfig
from tests.broker.messaging.helpers import msg
from tests.broker.messaging.memory_log import MemoryLog


async def refused(svc: MessagingService, m: OutgoingMessage) -> Code:
    """The gRPC code the endpoint answers the refused send with."""
    [out] = await svc.send([m])
    error = send_error(out)
    assert error is not None, out
    return error.code


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"body": b""}, Code.MESSAGE_BODY_EMPTY),
        ({"body": b"x" * (4 * 1024 * 1024 + 1)}, Code.MESSAGE_BODY_TOO_LARGE),
        ({"topic": "bad topic"}, Code.ILLEGAL_TOPIC),
        ({"topic": "x" * 200}, Code.ILLEGAL_TOPIC),
        ({"topic": "%RETRY%g"}, Code.ILLEGAL_TOPIC),
        ({"topic": "RMQ_SYS_TRANS_HALF_TOPIC"}, Code.ILLEGAL_TOPIC),
        ({"tag": "a|b"}, Code.ILLEGAL_MESSAGE_TAG),
        ({"tag": " "}, Code.ILLEGAL_MESSAGE_TAG),
        ({"keys": [""]}, Code.ILLEGAL_MESSAGE_KEY),
        ({"user_properties": {"UNIQ_KEY": "x"}}, Code.ILLEGAL_MESSAGE_PROPERTY_KEY),
        ({"user_properties": {"k": "v" * 20000}}, Code.MESSAGE_PROPERTIES_TOO_LARGE),
        ({"message_group": "g" * 65, "kind": MessageKind.FIFO}, Code.ILLEGAL_MESSAGE_GROUP),
        (
            {"kind": MessageKind.TRANSACTION, "message_group": "g"},
            Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
        ),
    ],
)
async def test_send_validation(
    svc: MessagingService, kwargs: dict[str, object], code: Code
) -> None:
    base: dict[str, object] = {"topic": "T", "body": b"x"}
    base.update(kwargs)
    assert await refused(svc, OutgoingMessage(**base)) is code  # type: ignore[arg-type]


async def test_batch_reports_each_message(svc: MessagingService, mlog: MemoryLog) -> None:
    out = await svc.send([msg(b"ok"), msg(b""), msg(b"ok2")])
    assert out[0].ok
    assert not out[1].ok
    assert out[2].ok
    assert mlog.bodies("T") == [b"ok", b"ok2"]


async def test_unknown_topic_without_auto_create(tmp_path: Path, clock: ManualClock) -> None:
    svc = MessagingService(
        MemoryLog(str(tmp_path)), MessagingConfig(autoCreateTopicEnable=False), clock=clock
    )
    assert await refused(svc, msg(b"x", topic="Nope")) is Code.TOPIC_NOT_FOUND


async def test_auto_created_topic_gets_default_queues(
    svc: MessagingService, mlog: MemoryLog
) -> None:
    await svc.send([msg(b"x", topic="Fresh")])
    cfg = mlog.topics.get("Fresh")
    assert cfg is not None and cfg.writeQueueNums == 8


async def test_topic_message_type_enforced(svc: MessagingService, mlog: MemoryLog) -> None:
    mlog.topics.put(TopicConfig("Fifo", 1, 1, attributes={"message.type": "FIFO"}))
    assert await refused(svc, msg(b"x", topic="Fifo")) is Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    [ok] = await svc.send([OutgoingMessage("Fifo", b"x", MessageKind.FIFO, message_group="a")])
    assert ok.ok


async def test_store_failure_is_reported(svc: MessagingService, mlog: MemoryLog) -> None:
    mlog.fail_next = PutStatus.FLUSH_DISK_TIMEOUT
    assert await refused(svc, msg(b"x")) is Code.MASTER_PERSISTENCE_TIMEOUT


async def test_fifo_messages_of_a_group_share_a_queue(svc: MessagingService) -> None:
    outs = await svc.send(
        [OutgoingMessage("T2", b"x", MessageKind.FIFO, message_group="grp") for _ in range(6)]
    )
    assert all(o.ok for o in outs)
    assert len({o.queue_id for o in outs}) == 1


async def test_delivery_time_too_far(svc: MessagingService, clock: ManualClock) -> None:
    far = clock.now_ms() + 4 * 24 * 3600 * 1000
    m = msg(b"x", kind=MessageKind.DELAY, delivery_timestamp_ms=far)
    assert await refused(svc, m) is Code.ILLEGAL_DELIVERY_TIME


def test_receipt_handle_round_trip() -> None:
    rh = ReceiptHandle("%RETRY%g", 3, 42, 1_700_000_000_000, 30_000, 7, "broker~x")
    assert ReceiptHandle.decode(rh.encode()) == rh
    assert rh.deadline_ms == 1_700_000_030_000
