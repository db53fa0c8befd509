"""Names of RocketMQ's system topics and groups, and the rules for user-chosen names."""

from __future__ import annotations

import re

from mqcluster.broker.messaging.errors import Code, MessagingError

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
SCHEDULE_TOPIC = "rmq_sys_wheel_timer"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
SCHEDULE_PROGRESS_GROUP = "CID_RMQ_SYS_TIMER"
TRANS_PROGRESS_GROUP = "CID_RMQ_SYS_TRANS"

SYSTEM_TOPICS = frozenset({SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC})

TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255
_NAME_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def check_topic(topic: str, *, for_send: bool = False) -> None:
    """Raise ILLEGAL_TOPIC for a name RocketMQ would refuse (or a system topic, on send)."""
    if not topic or not topic.strip():
        raise MessagingError(Code.ILLEGAL_TOPIC, "topic name is empty")
    if len(topic) > TOPIC_MAX_LENGTH:
        raise MessagingError(
            Code.ILLEGAL_TOPIC, f"topic name is longer than {TOPIC_MAX_LENGTH} characters"
        )
    if not _NAME_RE.match(topic):
        raise MessagingError(
            Code.ILLEGAL_TOPIC, f"topic {topic!r} has characters outside [%|a-zA-Z0-9_-]"
        )
    if for_send and (is_system_topic(topic) or topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
                     or topic.startswith(DLQ_GROUP_TOPIC_PREFIX)):
        raise MessagingError(Code.ILLEGAL_TOPIC, f"cannot send to system topic {topic!r}")


def check_group(group: str) -> None:
    if not group or not group.strip():
        raise MessagingError(Code.ILLEGAL_CONSUMER_GROUP, "consumer group name is empty")
    if len(group) > GROUP_MAX_LENGTH:
        raise MessagingError(
            Code.ILLEGAL_CONSUMER_GROUP,
            f"consumer group name is longer than {GROUP_MAX_LENGTH} characters",
        )
    if not _NAME_RE.match(group):
        raise MessagingError(
            Code.ILLEGAL_CONSUMER_GROUP,
            f"consumer group {group!r} has characters outside [%|a-zA-Z0-9_-]",
        )
