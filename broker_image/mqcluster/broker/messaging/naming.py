"""Names of RocketMQ's system topics and groups, and the rules for user-chosen names."""

from __future__ import annotations

from mqcluster.broker.messaging.errors import Code, MessagingError
from mqcluster.protocol.names import group_name_problem, topic_name_problem

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
SCHEDULE_TOPIC = "rmq_sys_wheel_timer"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
AUTO_CREATE_TOPIC_KEY = "TBW102"
"""The topic whose config auto-created topics copied in RocketMQ; never a real topic."""
SCHEDULE_PROGRESS_GROUP = "CID_RMQ_SYS_TIMER"
TRANS_PROGRESS_GROUP = "CID_RMQ_SYS_TRANS"

SYSTEM_TOPICS = frozenset({SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC})


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def is_not_for_producers(topic: str) -> bool:
    """System, retry and dead-letter topics, and TBW102: the broker's own to write."""
    return (topic == AUTO_CREATE_TOPIC_KEY or is_system_topic(topic)
            or topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
            or topic.startswith(DLQ_GROUP_TOPIC_PREFIX))


def check_topic(topic: str) -> None:
    """Raise ILLEGAL_TOPIC for a name RocketMQ would refuse."""
    problem = topic_name_problem(topic)
    if problem is not None:
        raise MessagingError(Code.ILLEGAL_TOPIC, problem)


def check_group(group: str) -> None:
    problem = group_name_problem(group)
    if problem is not None:
        raise MessagingError(Code.ILLEGAL_CONSUMER_GROUP, problem)
