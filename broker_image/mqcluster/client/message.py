"""Client-side message types."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from mqcluster.protocol.messages import PulledMessage, WireMessage


@dataclass
class Message:
    topic: str
    body: bytes
    tags: str | None = None
    keys: list[str] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0

    def to_wire(self) -> WireMessage:
        return WireMessage(
            body=self.body,
            tags=self.tags,
            keys=list(self.keys),
            properties=dict(self.properties),
            flag=self.flag,
        )


@dataclass(frozen=True, order=True)
class MessageQueue:
    topic: str
    broker_name: str
    queue_id: int


@dataclass(slots=True)
class SendResult:
    """``msg_id`` is the unique key the producer set; ``offset_msg_id`` the broker's id."""

    msg_id: str
    queue: MessageQueue
    queue_offset: int
    offset_msg_id: str = ""
    broker_addr: str = ""


class PullStatus(Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[PulledMessage] = field(default_factory=list)
