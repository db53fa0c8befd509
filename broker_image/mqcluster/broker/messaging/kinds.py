"""Message types (numbered as ``apache.rocketmq.v2.MessageType``) and what a topic accepts."""

from __future__ import annotations

from enum import IntEnum

from mqcluster.store.topic_config import TopicConfig

TOPIC_MESSAGE_TYPE_ATTRIBUTE = "message.type"


class MessageKind(IntEnum):
    UNSPECIFIED = 0
    NORMAL = 1
    FIFO = 2
    DELAY = 3
    TRANSACTION = 4


ALL_KINDS = (MessageKind.NORMAL, MessageKind.FIFO, MessageKind.DELAY, MessageKind.TRANSACTION)


def topic_kind(config: TopicConfig) -> str:
    attrs = config.attributes or {}
    value = attrs.get(TOPIC_MESSAGE_TYPE_ATTRIBUTE) or attrs.get("+" + TOPIC_MESSAGE_TYPE_ATTRIBUTE)
    return (value or "MIXED").upper()


def accepted_kinds(config: TopicConfig) -> tuple[MessageKind, ...]:
    """A topic typed NORMAL/FIFO/DELAY/TRANSACTION takes that type; an untyped one all four."""
    kind = topic_kind(config)
    if kind in MessageKind.__members__ and kind != "UNSPECIFIED":
        return (MessageKind[kind],)
    return ALL_KINDS
