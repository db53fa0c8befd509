"""SendMessage: validation, queue choice, and routing of delayed and half messages."""

from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass, field

from mqcluster.broker.messaging import properties as p
from mqcluster.broker.messaging.catalog import Catalog
from mqcluster.broker.messaging.clock import Clock
from mqcluster.broker.messaging.config import MessagingConfig
from mqcluster.broker.messaging.delay import DelayService, encode_recall_handle
from mqcluster.broker.messaging.errors import Code, MessagingError
from mqcluster.broker.messaging.kinds import MessageKind, accepted_kinds
from mqcluster.broker.messaging.message_id import MessageIdGenerator
from mqcluster.broker.messaging.naming import check_topic
from mqcluster.broker.messaging.store_port import MessageLog
from mqcluster.broker.messaging.transaction import TransactionService
from mqcluster.store.message import MessageRecord, PutResult, PutStatus
from mqcluster.store.validation import (
    key_problem,
    message_group_problem,
    property_problem,
    tag_problem,
)


@dataclass
class OutgoingMessage:
    """A message as a producer hands it over; times in milliseconds."""

    topic: str
    body: bytes
    kind: MessageKind = MessageKind.NORMAL
    tag: str | None = None
    keys: list[str] = field(default_factory=list)
    user_properties: dict[str, str] = field(default_factory=dict)
    message_id: str | None = None
    born_timestamp_ms: int = 0
    born_host: str = ""
    message_group: str | None = None
    delivery_timestamp_ms: int | None = None
    trace_context: str | None = None


@dataclass(frozen=True)
class SendOutcome:
    message_id: str
    queue_id: int
    offset: int
    transaction_id: str = ""
    recall_handle: str = ""


_PUT_FAILURES = {
    PutStatus.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
    PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH: Code.HA_NOT_AVAILABLE,
    PutStatus.SERVICE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
    PutStatus.MESSAGE_ILLEGAL: Code.BAD_REQUEST,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: Code.MESSAGE_PROPERTIES_TOO_LARGE,
    PutStatus.OS_PAGE_CACHE_BUSY: Code.TOO_MANY_REQUESTS,
}


def _refuse(code: Code, problem: str | None) -> None:
    if problem is not None:
        raise MessagingError(code, problem)


def check_put(result: PutResult) -> None:
    if result.ok:
        return
    code = _PUT_FAILURES.get(result.status, Code.INTERNAL_SERVER_ERROR)
    detail = f": {result.remark}" if result.remark else ""
    raise MessagingError(code, f"store refused the message ({result.status.value}){detail}")


class SendService:
    def __init__(self, log: MessageLog, catalog: Catalog, clock: Clock, config: MessagingConfig,
                 delay: DelayService, transactions: TransactionService) -> None:
        self._log = log
        self._catalog = catalog
        self._clock = clock
        self._config = config
        self._delay = delay
        self._transactions = transactions
        self._ids = MessageIdGenerator()
        self._round_robin: dict[str, itertools.count[int]] = {}

    def validate(self, msg: OutgoingMessage) -> None:
        cfg = self._config
        check_topic(msg.topic, for_send=True)
        if not msg.body:
            raise MessagingError(Code.MESSAGE_BODY_EMPTY, "message body is empty")
        if len(msg.body) > cfg.maxMessageSize:
            raise MessagingError(
                Code.MESSAGE_BODY_TOO_LARGE,
                f"message body is {len(msg.body)} bytes, more than maxMessageSize "
                f"{cfg.maxMessageSize}",
            )
        if msg.tag is not None:
            _refuse(Code.ILLEGAL_MESSAGE_TAG, tag_problem(msg.tag))
        for key in msg.keys:
            _refuse(Code.ILLEGAL_MESSAGE_KEY, key_problem(key))
        if msg.message_group is not None:
            _refuse(Code.ILLEGAL_MESSAGE_GROUP,
                    message_group_problem(msg.message_group, cfg.maxMessageGroupSize))
        if msg.message_id is not None:
            if len(msg.message_id) > cfg.maxMessageIdSize:
                raise MessagingError(Code.ILLEGAL_MESSAGE_ID, "message id is too long")
            _refuse(Code.ILLEGAL_MESSAGE_ID, property_problem("message id", msg.message_id))
        if msg.trace_context is not None:
            _refuse(Code.BAD_REQUEST, property_problem("trace_context", msg.trace_context))
        if len(msg.user_properties) > cfg.maxUserPropertyCount:
            raise MessagingError(
                Code.MESSAGE_PROPERTIES_TOO_LARGE,
                f"more than {cfg.maxUserPropertyCount} user properties",
            )
        size = 0
        for key, value in msg.user_properties.items():
            # ("__" names are the broker's own: a consumer is never shown them.)
            if key in p.SYSTEM_PROPERTIES or key.startswith("__"):
                raise MessagingError(
                    Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property key {key!r} is reserved"
                )
            _refuse(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, property_problem(key, value))
            size += len(key.encode()) + len(value.encode())
        if size > cfg.maxUserPropertySize:
            raise MessagingError(
                Code.MESSAGE_PROPERTIES_TOO_LARGE,
                f"user properties are {size} bytes, more than {cfg.maxUserPropertySize}",
            )
        if msg.kind is MessageKind.TRANSACTION and (
                msg.message_group is not None or msg.delivery_timestamp_ms is not None):
            raise MessagingError(
                Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                "a transactional message cannot have a message group or a delivery time",
            )
        if msg.delivery_timestamp_ms is not None:
            limit = self._clock.now_ms() + cfg.timerMaxDelaySec * 1000
            if msg.delivery_timestamp_ms > limit:
                raise MessagingError(
                    Code.ILLEGAL_DELIVERY_TIME,
                    f"delivery time is more than timerMaxDelaySec ({cfg.timerMaxDelaySec} s) away",
                )

    def _queue_for(self, msg: OutgoingMessage, queue_nums: int) -> int:
        if msg.message_group is not None:
            return zlib.crc32(msg.message_group.encode()) % queue_nums
        counter = self._round_robin.setdefault(msg.topic, itertools.count())
        return next(counter) % queue_nums

    def _record(self, msg: OutgoingMessage, queue_id: int, message_id: str) -> MessageRecord:
        props = dict(msg.user_properties)
        props[p.PROPERTY_UNIQ_KEY] = message_id
        if msg.message_group is not None:
            props[p.PROPERTY_MSG_GROUP] = msg.message_group
        if msg.delivery_timestamp_ms is not None:
            props[p.PROPERTY_TIMER_DELIVER_MS] = str(msg.delivery_timestamp_ms)
        if msg.trace_context:
            props[p.PROPERTY_TRACE_CONTEXT] = msg.trace_context
        return MessageRecord(
            topic=msg.topic, queue_id=queue_id, body=msg.body, tags=msg.tag,
            keys=list(msg.keys), properties=props,
            born_timestamp=msg.born_timestamp_ms or self._clock.now_ms(), born_host=msg.born_host,
        )

    async def send(self, msg: OutgoingMessage) -> SendOutcome:
        self.validate(msg)
        topic = self._catalog.topic(msg.topic)
        self._catalog.check_writable(topic)
        accepted = accepted_kinds(topic)
        if msg.kind not in accepted:
            raise MessagingError(
                Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                f"topic {msg.topic!r} takes {'/'.join(k.name for k in accepted)} messages, "
                f"not {msg.kind.name}",
            )
        message_id = msg.message_id or self._ids.next(self._clock.now_ms())
        queue_id = self._queue_for(msg, max(1, topic.writeQueueNums))
        rec = self._record(msg, queue_id, message_id)
        if msg.kind is MessageKind.TRANSACTION:
            result, tid = await self._transactions.prepare(rec)
            check_put(result)
            return SendOutcome(message_id, queue_id, result.queue_offset, transaction_id=tid)
        due = msg.delivery_timestamp_ms
        if due is not None and due > self._clock.now_ms():
            result = await self._delay.schedule(rec, due)
            check_put(result)
            return SendOutcome(message_id, queue_id, result.queue_offset,
                               recall_handle=encode_recall_handle(result.queue_offset, message_id))
        result = await self._log.put_message(rec)
        check_put(result)
        return SendOutcome(message_id, queue_id, result.queue_offset)
