"""The authorization hook of sends and reads (``access.authorize``) checks the user
its front end authenticated, and refuses before anything is created."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqcluster.auth.guard import Guard
from mqcluster.auth.model import parse_acl_config
from mqcluster.broker.messaging.access import ANONYMOUS, Caller, TopicAccess
from mqcluster.broker.messaging.config import MessagingConfig
from mqcluster.broker.messaging.refusal import Reason, Refusal
from tests.broker.messaging.memory_log import MemoryLog

ACL = parse_acl_config({
    "users": [{"username": "alice", "password": "pw"}],
    "acls": [{"subject": "User:alice", "policies": [{"entries": [
        {"resource": "Topic:mine*", "actions": ["Pub"], "decision": "Allow"},
        {"resource": "Group:g", "actions": ["Sub"], "decision": "Allow",
         "sourceIps": ["10.0.0.0/8"]}]}]}]})
GUARD = Guard(True, True, lambda: ACL)
ALICE = Caller("client-1", "127.0.0.1", ACL.users["alice"], GUARD)


@pytest.fixture
def access(tmp_path: Path) -> TopicAccess:
    log = MemoryLog(str(tmp_path))
    config = MessagingConfig(brokerName="broker-a", autoCreateTopicEnable=True)
    return TopicAccess(log.topics, lambda: config, where="broker broker-a",
                       groups=log.subscriptions)


def test_a_topic_the_user_may_not_write_is_refused_and_not_created(
        access: TopicAccess) -> None:
    assert access.for_write("mine-1", ALICE).topicName == "mine-1"
    with pytest.raises(Refusal) as err:
        access.for_write("theirs", ALICE)
    assert err.value.reason is Reason.UNAUTHORIZED
    assert "user alice has no right Pub on Topic:theirs" in err.value.remark
    assert access.topics.get("theirs") is None


def test_a_group_is_checked_against_the_callers_address(access: TopicAccess) -> None:
    with pytest.raises(Refusal, match=r"no right Sub on Group:g from 127\.0\.0\.1"):
        access.consuming_group("g", ALICE)
    assert access.consuming_group("g", ALICE._replace(address="10.1.1.1")).groupName == "g"


def test_without_acl_every_caller_passes_as_before(access: TopicAccess) -> None:
    assert access.for_write("theirs", ANONYMOUS).topicName == "theirs"
