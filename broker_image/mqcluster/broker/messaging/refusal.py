"""Why the message service refuses a send or a read, in words of its own.

Each front end answers a ``Refusal`` with its own status code through a small table
(``handlers/send.py`` for remoting, ``grpc/send_status.py`` for gRPC); the remark is the
same sentence on both, naming what is wrong.
"""

from __future__ import annotations

from enum import Enum


class Reason(Enum):
    """What a refused send (or read) broke; named after gRPC's codes where one fits."""

    NO_MESSAGE = "NO_MESSAGE"
    ILLEGAL_TOPIC = "ILLEGAL_TOPIC"
    SYSTEM_TOPIC = "SYSTEM_TOPIC"
    MESSAGE_BODY_EMPTY = "MESSAGE_BODY_EMPTY"
    MESSAGE_BODY_TOO_LARGE = "MESSAGE_BODY_TOO_LARGE"
    TRANSACTION_NOT_ON_THIS_PROTOCOL = "TRANSACTION_NOT_ON_THIS_PROTOCOL"
    ILLEGAL_SYS_FLAG = "ILLEGAL_SYS_FLAG"
    ILLEGAL_QUEUE_ID = "ILLEGAL_QUEUE_ID"
    ILLEGAL_MESSAGE_TAG = "ILLEGAL_MESSAGE_TAG"
    ILLEGAL_MESSAGE_KEY = "ILLEGAL_MESSAGE_KEY"
    ILLEGAL_MESSAGE_GROUP = "ILLEGAL_MESSAGE_GROUP"
    ILLEGAL_MESSAGE_ID = "ILLEGAL_MESSAGE_ID"
    ILLEGAL_MESSAGE_PROPERTY_KEY = "ILLEGAL_MESSAGE_PROPERTY_KEY"
    ILLEGAL_TRACE_CONTEXT = "ILLEGAL_TRACE_CONTEXT"
    MESSAGE_PROPERTIES_TOO_LARGE = "MESSAGE_PROPERTIES_TOO_LARGE"
    ILLEGAL_DELIVERY_TIME = "ILLEGAL_DELIVERY_TIME"
    MESSAGE_PROPERTY_CONFLICT_WITH_TYPE = "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE"
    NOT_MASTER = "NOT_MASTER"
    BROKER_NOT_WRITABLE = "BROKER_NOT_WRITABLE"
    BROKER_NOT_READABLE = "BROKER_NOT_READABLE"
    TOPIC_NOT_FOUND = "TOPIC_NOT_FOUND"
    TOPIC_NOT_WRITABLE = "TOPIC_NOT_WRITABLE"
    TOPIC_NOT_READABLE = "TOPIC_NOT_READABLE"
    ILLEGAL_CONSUMER_GROUP = "ILLEGAL_CONSUMER_GROUP"
    GROUP_NOT_FOUND = "GROUP_NOT_FOUND"
    GROUP_NOT_CONSUMING = "GROUP_NOT_CONSUMING"
    UNAUTHORIZED = "UNAUTHORIZED"
    UNSUPPORTED = "UNSUPPORTED"


class Refusal(Exception):
    """A request the service refuses before anything is created or stored."""

    def __init__(self, reason: Reason, remark: str) -> None:
        super().__init__(remark)
        self.reason = reason
        self.remark = remark

    def __repr__(self) -> str:
        return f"Refusal({self.reason.name}, {self.remark!r})"
