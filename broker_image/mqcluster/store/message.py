"""Public message types of the store: what producers send and what readers get back."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from mqcluster.protocol.properties import PROPERTY_UNIQ_KEY


@dataclass
class MessageRecord:
    """A message as a producer sends it; ``born_timestamp`` is in milliseconds."""

    topic: str
    queue_id: int
    body: bytes
    tags: str | None = None
    keys: list[str] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    born_timestamp: int = 0
    born_host: str = ""
    flag: int = 0
    sys_flag: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_KEY)


@dataclass
class StoredMessage(MessageRecord):
    """A message read back from the commitlog, with the positions the store assigned.

    ``msg_id`` is the producer's ``UNIQ_KEY`` when it set one, else ``offset_msg_id``.
    ``offset_msg_id`` is RocketMQ's offset message id: store host and commitlog offset.
    """

    msg_id: str = ""
    queue_offset: int = 0
    commitlog_offset: int = 0
    store_size: int = 0
    store_timestamp: int = 0
    store_host: str = ""
    body_crc: int = 0
    offset_msg_id: str = ""

    @property
    def next_commitlog_offset(self) -> int:
        return self.commitlog_offset + self.store_size


class PutStatus(Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    IN_SYNC_REPLICAS_NOT_ENOUGH = "IN_SYNC_REPLICAS_NOT_ENOUGH"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"

    @property
    def stored(self) -> bool:
        """True when the message is in the commitlog (possibly not yet flushed)."""
        return self in _STORED


_STORED = (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.FLUSH_SLAVE_TIMEOUT,
           PutStatus.SLAVE_NOT_AVAILABLE)
"""(A constant: a member lookup on an Enum class costs a descriptor call each time.)"""


@dataclass
class PutResult:
    status: PutStatus
    msg_id: str = ""
    queue_offset: int = -1
    commitlog_offset: int = -1
    store_size: int = 0
    store_timestamp: int = 0
    offset_msg_id: str = ""
    remark: str = ""

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK

    @property
    def next_commitlog_offset(self) -> int:
        return self.commitlog_offset + self.store_size


class GetStatus(Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass
class GetResult:
    """Messages of one queue from ``offset``; ``next_offset`` is where the next read starts."""

    status: GetStatus
    messages: list[StoredMessage] = field(default_factory=list)
    next_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
