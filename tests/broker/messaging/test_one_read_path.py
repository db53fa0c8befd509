"""The read side's rules are one set for remoting pulls and gRPC receives: the broker's and
the topic's read permission, the queue id, the consumer group (name, existence,
consumeEnable, auto-creation), each asked of the authorization hook first; the gRPC
endpoint answers a refusal through its table."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqcluster.broker.grpc.server import _failure
from mqcluster.broker.messaging.access import (
    Action,
    Caller,
    Resource,
    TopicAccess,
    check_read_queue,
)
from mqcluster.broker.messaging.config import MessagingConfig
from mqcluster.broker.messaging.errors import Code, MessagingError
from mqcluster.broker.messaging.refusal import Reason, Refusal
from mqcluster.broker.messaging.service import MessagingService
from mqcluster.broker.remoting_status import REFUSAL_CODES as REMOTING_CODES
from mqcluster.protocol.broker import BrokerResponseCode
from mqcluster.store.subscription_group import SubscriptionGroupConfig
from mqcluster.store.topic_config import PERM_READ, PERM_WRITE, TopicConfig
from tests.broker.messaging.memory_log import MemoryLog


@pytest.fixture
def mlog(tmp_path: Path) -> MemoryLog:
    log = MemoryLog(str(tmp_path))
    log.topics.put(TopicConfig("T", 2, 2))
    log.topics.put(TopicConfig("WriteOnly", 2, 2, PERM_WRITE))
    log.subscriptions.put(SubscriptionGroupConfig("Off", consumeEnable=False))
    return log


def _refusal(fn: object, *args: object, **kwargs: object) -> Refusal:
    with pytest.raises(Refusal) as err:
        fn(*args, **kwargs)  # type: ignore[operator]
    return err.value


@pytest.mark.parametrize(("topic", "perm", "reason", "grpc", "remoting"), [
    ("T", PERM_WRITE, Reason.BROKER_NOT_READABLE, Code.FORBIDDEN, BrokerResponseCode.NO_PERMISSION),
    ("Nope", PERM_READ | PERM_WRITE, Reason.TOPIC_NOT_FOUND, Code.TOPIC_NOT_FOUND,
     BrokerResponseCode.TOPIC_NOT_EXIST),
    ("WriteOnly", PERM_READ | PERM_WRITE, Reason.TOPIC_NOT_READABLE, Code.FORBIDDEN,
     BrokerResponseCode.NO_PERMISSION),
])
def test_a_read_the_broker_or_topic_forbids_is_refused_by_both_front_ends(
        mlog: MemoryLog, topic: str, perm: int, reason: Reason, grpc: Code,
        remoting: int) -> None:
    svc = MessagingService(mlog, MessagingConfig(brokerName="broker-a"),
                           broker_permission=lambda: perm)
    refusal = _refusal(svc.check_queue, topic, 0)
    assert refusal.reason is reason
    answered = _failure(refusal, "ReceiveMessage")
    assert (answered.code, answered.message) == (grpc, refusal.remark)
    assert REMOTING_CODES[reason] == remoting
    assert mlog.topics.get("Nope") is None


@pytest.mark.parametrize(("queue_id", "any_queue", "ok"), [
    (0, False, True), (1, False, True), (2, False, False), (-1, False, False), (-1, True, True),
    (-2, True, False)])
def test_a_read_names_one_of_the_topics_read_queues(
        queue_id: int, any_queue: bool, ok: bool) -> None:
    topic = TopicConfig("T", 2, 4)
    if ok:
        check_read_queue(queue_id, topic, any_queue=any_queue)
        return
    refusal = _refusal(check_read_queue, queue_id, topic, any_queue=any_queue)
    assert refusal.reason is Reason.ILLEGAL_QUEUE_ID
    assert refusal.remark == f"queueId={queue_id} is illegal: topic 'T' has 2 read queues"


def _access(mlog: MemoryLog, auto: bool = True, asked: list[object] | None = None) -> TopicAccess:
    config = MessagingConfig(autoCreateSubscriptionGroup=auto)

    def record(caller: Caller, resource: Resource, action: Action) -> None:
        if asked is not None:
            asked.append((caller, resource, action))

    return TopicAccess(mlog.topics, lambda: config, where="broker broker-a",
                       groups=mlog.subscriptions, authorizer=record)


@pytest.mark.parametrize(("group", "auto", "reason"), [
    ("a b", True, Reason.ILLEGAL_CONSUMER_GROUP),
    ("g" * 300, True, Reason.ILLEGAL_CONSUMER_GROUP),
    ("New", False, Reason.GROUP_NOT_FOUND),
    ("Off", True, Reason.GROUP_NOT_CONSUMING),
])
def test_a_group_that_may_not_consume_here_is_refused_and_not_created(
        mlog: MemoryLog, group: str, auto: bool, reason: Reason) -> None:
    refusal = _refusal(_access(mlog, auto).consuming_group, group)
    assert refusal.reason is reason
    assert group == "Off" or mlog.subscriptions.get(group) is None


def test_a_groups_lookup_asks_the_hook_first_then_creates_it(mlog: MemoryLog) -> None:
    asked: list[object] = []
    access = _access(mlog, asked=asked)
    assert access.consuming_group("G", Caller("c1")).groupName == "G"
    assert access.for_read("T", Caller("c1")).topicName == "T"
    assert asked == [(Caller("c1"), Resource("Group", "G"), Action.SUB),
                     (Caller("c1"), Resource("Topic", "T"), Action.SUB)]
    assert mlog.subscriptions.get("G") is not None


def test_a_refusal_outside_the_send_path_becomes_the_grpc_status() -> None:
    answered = _failure(Refusal(Reason.GROUP_NOT_FOUND, "no such group"), "Heartbeat")
    assert isinstance(answered, MessagingError)
    assert (answered.code, answered.message) == (Code.CONSUMER_GROUP_NOT_FOUND, "no such group")
