"""Every check a send passes before it is stored, whichever front end it came through.

Each raises ``Refusal`` naming the field and what is wrong. The name rules themselves
are ``mqcluster.protocol.names``' (RocketMQ's validators).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Protocol

from mqcluster.broker.messaging import properties as p
from mqcluster.broker.messaging.kinds import MessageKind, accepted_kinds
from mqcluster.broker.messaging.naming import is_not_for_producers
from mqcluster.broker.messaging.refusal import Reason, Refusal
from mqcluster.protocol.names import (
    MAX_TOPIC_LENGTH,
    key_problem,
    message_group_problem,
    property_problem,
    tag_problem,
    topic_name_problem,
)
from mqcluster.store.topic_config import TopicConfig

# RocketMQ's MessageSysFlag bits a producer may set on a send: COMPRESSED_FLAG,
# MULTI_TAGS_FLAG and the compression type (bits 8-10). The transaction types (bits
# 2-3) are refused on remoting (gRPC carries transactions as a message type); the
# others (host-address families, inner batch, unwrap) are the broker's own or features
# this broker lacks.
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_TYPE_MASK = 0x3 << 2
COMPRESSION_TYPE_MASK = 0x7 << 8
SEND_SYS_FLAG_BITS = COMPRESSED_FLAG | MULTI_TAGS_FLAG | COMPRESSION_TYPE_MASK

TRANSACTIONS_ON_GRPC = (
    "transactional messages (sysFlag bits 0x4/0x8) are not accepted on the remoting "
    "protocol: send them through the gRPC endpoint, which handles EndTransaction and "
    "the check-back to the producer"
)


class MessageLimits(Protocol):
    """The size keys (``BrokerConfig`` and ``MessagingConfig`` fit)."""

    maxMessageSize: int


class FieldLimits(MessageLimits, Protocol):
    """What a message's own fields are held to (``MessagingConfig`` fits)."""

    maxUserPropertySize: int
    maxUserPropertyCount: int
    maxMessageGroupSize: int
    maxMessageIdSize: int
    timerMaxDelaySec: int


def check_send_topic(topic: str) -> None:
    # (A name too long is refused without caching it: no client fills the cache.)
    bad = _send_topic_problem(topic) if len(topic) <= MAX_TOPIC_LENGTH else (
        Reason.ILLEGAL_TOPIC, topic_name_problem(topic) or "")
    if bad is not None:
        raise Refusal(*bad)


@functools.lru_cache(maxsize=4096)  # (every send checks its topic: the same few recur)
def _send_topic_problem(topic: str) -> tuple[Reason, str] | None:
    problem = topic_name_problem(topic)
    if problem is not None:
        return Reason.ILLEGAL_TOPIC, problem
    if is_not_for_producers(topic):
        return Reason.SYSTEM_TOPIC, f"cannot send to system topic {topic!r}"
    return None


def check_sys_flag(sys_flag: int) -> None:
    if sys_flag & TRANSACTION_TYPE_MASK:
        raise Refusal(Reason.TRANSACTION_NOT_ON_THIS_PROTOCOL,
                      f"sysFlag={sys_flag}: {TRANSACTIONS_ON_GRPC}")
    unknown = sys_flag & ~SEND_SYS_FLAG_BITS
    if unknown:
        raise Refusal(
            Reason.ILLEGAL_SYS_FLAG,
            f"sysFlag={sys_flag} has bits {unknown & 0xFFFFFFFF:#x} a send may not set "
            f"(allowed: {SEND_SYS_FLAG_BITS:#x})",
        )


def check_bodies(bodies: Sequence[bytes], limit: int) -> None:
    """A request's bodies: none empty, each and (for a batch) all together within
    ``maxMessageSize``. The store checks the properties' size (PROPERTIES_SIZE_EXCEEDED)."""
    if not bodies:
        raise Refusal(Reason.NO_MESSAGE, "no message to send")
    if len(bodies) == 1:
        size = len(bodies[0])
        if not size:
            raise Refusal(Reason.MESSAGE_BODY_EMPTY, "message body is empty")
        if size > limit:
            raise Refusal(Reason.MESSAGE_BODY_TOO_LARGE,
                          f"message body is {size} bytes, more than maxMessageSize {limit}")
        return
    total = 0
    for i, body in enumerate(bodies):
        if not body:
            raise Refusal(Reason.MESSAGE_BODY_EMPTY, f"message {i} has an empty body")
        if len(body) > limit:
            raise Refusal(Reason.MESSAGE_BODY_TOO_LARGE,
                          f"message body is {len(body)} bytes, more than maxMessageSize {limit}")
        total += len(body)
    if total > limit:
        raise Refusal(Reason.MESSAGE_BODY_TOO_LARGE,
                      f"batch body of {total} bytes exceeds maxMessageSize {limit}")


def check_queue_id(queue_id: int, topic: TopicConfig) -> None:
    """A queue the producer chose (``-1`` lets the broker choose)."""
    if queue_id >= topic.writeQueueNums:
        raise Refusal(
            Reason.ILLEGAL_QUEUE_ID,
            f"queueId={queue_id} is illegal: topic {topic.topicName!r} has "
            f"{topic.writeQueueNums} write queues",
        )


def _refuse(reason: Reason, problem: str | None) -> None:
    if problem is not None:
        raise Refusal(reason, problem)


def check_fields(tag: str | None, keys: Sequence[str], message_group: str | None,
                 message_id: str | None, trace_context: str | None,
                 user_properties: dict[str, str], limits: FieldLimits) -> None:
    """A message's tag, keys, message group, id and user properties."""
    if tag is not None:
        _refuse(Reason.ILLEGAL_MESSAGE_TAG, tag_problem(tag))
    for key in keys:
        _refuse(Reason.ILLEGAL_MESSAGE_KEY, key_problem(key))
    if message_group is not None:
        _refuse(Reason.ILLEGAL_MESSAGE_GROUP,
                message_group_problem(message_group, limits.maxMessageGroupSize))
    if message_id is not None:
        if len(message_id) > limits.maxMessageIdSize:
            raise Refusal(Reason.ILLEGAL_MESSAGE_ID, "message id is too long")
        _refuse(Reason.ILLEGAL_MESSAGE_ID, property_problem("message id", message_id))
    if trace_context is not None:
        _refuse(Reason.ILLEGAL_TRACE_CONTEXT, property_problem("trace_context", trace_context))
    if len(user_properties) > limits.maxUserPropertyCount:
        raise Refusal(Reason.MESSAGE_PROPERTIES_TOO_LARGE,
                      f"more than {limits.maxUserPropertyCount} user properties")
    size = 0
    for key, value in user_properties.items():
        # ("__" names are the broker's own: a consumer is never shown them.)
        if key in p.SYSTEM_PROPERTIES or key.startswith("__"):
            raise Refusal(Reason.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property key {key!r} is reserved")
        _refuse(Reason.ILLEGAL_MESSAGE_PROPERTY_KEY, property_problem(key, value))
        size += len(key.encode()) + len(value.encode())
    if size > limits.maxUserPropertySize:
        raise Refusal(Reason.MESSAGE_PROPERTIES_TOO_LARGE,
                      f"user properties are {size} bytes, more than {limits.maxUserPropertySize}")


def check_timing(kind: MessageKind, message_group: str | None, delivery_ms: int | None,
                 now_ms: int, limits: FieldLimits) -> None:
    """A transactional message has no group or delivery time; a delivery time is within
    ``timerMaxDelaySec``."""
    if kind is MessageKind.TRANSACTION and (message_group is not None or delivery_ms is not None):
        raise Refusal(Reason.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                      "a transactional message cannot have a message group or a delivery time")
    if delivery_ms is not None and delivery_ms > now_ms + limits.timerMaxDelaySec * 1000:
        raise Refusal(Reason.ILLEGAL_DELIVERY_TIME,
                      f"delivery time is more than timerMaxDelaySec ({limits.timerMaxDelaySec} s)"
                      " away")


def check_kind(kind: MessageKind, topic: TopicConfig) -> None:
    accepted = accepted_kinds(topic)
    if kind not in accepted:
        raise Refusal(
            Reason.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            f"topic {topic.topicName!r} takes {'/'.join(k.name for k in accepted)} messages, "
            f"not {kind.name}",
        )
