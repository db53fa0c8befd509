"""One send path for both front ends: a gRPC message and a remoting request that break the
same rule are refused for the same reason, with the same remark, before anything is
created or stored; each front end's table has an answer for every reason; the
authorization hook is asked before a topic is looked up or created."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqcluster.broker.grpc.send_status import REFUSAL_CODES as GRPC_CODES
from mqcluster.broker.messaging.access import Action, Authorizer, Caller, Resource, TopicAccess
from mqcluster.broker.messaging.clock import ManualClock
from mqcluster.broker.messaging.config import MessagingConfig
from mqcluster.broker.messaging.errors import Code
from mqcluster.broker.messaging.refusal import Reason, Refusal
from mqcluster.broker.messaging.send import (
    OutgoingMessage,
    SendOutcome,
    SendRequest,
    SendService,
)
from mqcluster.broker.remoting_status import REFUSAL_CODES as REMOTING_CODES
from mqcluster.protocol.broker import BrokerResponseCode
from mqcluster.protocol.messages import WireMessage
from mqcluster.store.topic_config import PERM_READ, TopicConfig
from tests.broker.messaging.memory_log import MemoryLog

LIMIT = 4 * 1024 * 1024


def _allow(caller: Caller, resource: Resource, action: Action) -> None:
    return None


def _service(mlog: MemoryLog, *, perm: int = 6, master: bool = True, auto: bool = True,
             authorizer: Authorizer = _allow) -> SendService:
    config = MessagingConfig(brokerName="broker-a", autoCreateTopicEnable=auto)
    access = TopicAccess(mlog.topics, lambda: config, where="broker broker-a",
                         groups=mlog.subscriptions, broker_permission=lambda: perm,
                         is_master=lambda: master, authorizer=authorizer)
    return SendService(mlog, access, limits=lambda: config, clock=ManualClock(), fields=config)


@pytest.fixture
def mlog(tmp_path: Path) -> MemoryLog:
    log = MemoryLog(str(tmp_path))
    log.topics.put(TopicConfig("T", 2, 2))
    log.topics.put(TopicConfig("ReadOnly", 2, 2, PERM_READ))
    return log


async def _both(svc: SendService, topic: str, body: bytes) -> tuple[SendOutcome, SendOutcome]:
    grpc = await svc.send(OutgoingMessage(topic, body), Caller("client-1"))
    [remoting] = await svc.send_many([SendRequest(topic, [WireMessage(body)], producer_group="PG")])
    return grpc, remoting


@pytest.mark.parametrize(("topic", "body", "setting", "reason"), [
    ("bad topic", b"x", {}, Reason.ILLEGAL_TOPIC),
    ("x" * 200, b"x", {}, Reason.ILLEGAL_TOPIC),
    ("TBW102", b"x", {}, Reason.SYSTEM_TOPIC),
    ("%RETRY%g", b"x", {}, Reason.SYSTEM_TOPIC),
    ("%DLQ%g", b"x", {}, Reason.SYSTEM_TOPIC),
    ("rmq_sys_wheel_timer", b"x", {}, Reason.SYSTEM_TOPIC),
    ("RMQ_SYS_TRANS_HALF_TOPIC", b"x", {}, Reason.SYSTEM_TOPIC),
    ("T", b"", {}, Reason.MESSAGE_BODY_EMPTY),
    ("T", b"x" * (LIMIT + 1), {}, Reason.MESSAGE_BODY_TOO_LARGE),
    ("T", b"x", {"master": False}, Reason.NOT_MASTER),
    ("Fresh", b"x", {"master": False}, Reason.NOT_MASTER),
    ("T", b"x", {"perm": PERM_READ}, Reason.BROKER_NOT_WRITABLE),
    ("Fresh", b"x", {"perm": PERM_READ}, Reason.BROKER_NOT_WRITABLE),
    ("Fresh", b"x", {"auto": False}, Reason.TOPIC_NOT_FOUND),
    ("ReadOnly", b"x", {}, Reason.TOPIC_NOT_WRITABLE),
])
async def test_both_front_ends_sends_are_refused_for_one_reason_with_one_remark(
        mlog: MemoryLog, topic: str, body: bytes, setting: dict[str, object],
        reason: Reason) -> None:
    topics_before = set(mlog.topics.table)
    svc = _service(mlog, **setting)  # type: ignore[arg-type]
    grpc, remoting = await _both(svc, topic, body)
    assert grpc.refusal is not None and remoting.refusal is not None
    assert grpc.refusal.reason is remoting.refusal.reason is reason
    assert grpc.refusal.remark == remoting.refusal.remark
    assert not grpc.offset_msg_ids and not remoting.offset_msg_ids
    assert mlog.bodies(topic, 0) == [] and mlog.bodies(topic, 1) == []
    assert set(mlog.topics.table) == topics_before


async def test_both_front_ends_store_an_acceptable_send_and_auto_create_its_topic(
        mlog: MemoryLog) -> None:
    grpc, remoting = await _both(_service(mlog), "Fresh", b"m")
    assert grpc.ok and remoting.ok
    assert sorted(mlog.bodies("Fresh", q) for q in range(4)) == [[], [], [b"m"], [b"m"]]


def test_each_front_end_answers_every_reason() -> None:
    assert set(GRPC_CODES) == set(Reason) == set(REMOTING_CODES)
    assert GRPC_CODES[Reason.UNAUTHORIZED] is Code.UNAUTHORIZED
    assert REMOTING_CODES[Reason.UNAUTHORIZED] == BrokerResponseCode.NO_PERMISSION


async def test_the_authorization_hook_is_asked_before_a_topic_is_created(
        mlog: MemoryLog) -> None:
    asked: list[tuple[Caller, Resource, Action]] = []

    def deny(caller: Caller, resource: Resource, action: Action) -> None:
        asked.append((caller, resource, action))
        raise Refusal(Reason.UNAUTHORIZED, f"{caller.identity} may not {action.value} "
                                           f"{resource.kind} {resource.name}")

    grpc, remoting = await _both(_service(mlog, authorizer=deny), "Fresh", b"m")
    assert grpc.refusal is not None and grpc.refusal.reason is Reason.UNAUTHORIZED
    assert remoting.refusal is not None and remoting.refusal.reason is Reason.UNAUTHORIZED
    assert asked == [(Caller("client-1"), Resource("Topic", "Fresh"), Action.PUB),
                     (Caller("PG"), Resource("Topic", "Fresh"), Action.PUB)]
    assert mlog.topics.get("Fresh") is None


async def test_a_remoting_send_to_any_queue_goes_round_robin(mlog: MemoryLog) -> None:
    svc = _service(mlog)
    outs = await svc.send_many([SendRequest("T", [WireMessage(b"m")]) for _ in range(4)])
    assert [o.queue_id for o in outs] == [0, 1, 0, 1]
