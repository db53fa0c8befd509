"""The broker's one send path, behind the remoting handlers and the gRPC endpoint alike.

A send is checked (``send_checks``), authorized (``access.authorize``) and its topic
looked up or auto-created with the broker's permissions (``access.TopicAccess``), given a
queue, written (delayed and half messages through their services), counted in the
metrics, and answered with one ``SendOutcome``. The front ends only decode their
request into an ``OutgoingMessage`` (gRPC) or a ``SendRequest`` (remoting) and encode
the outcome with their own status table.
"""

from __future__ import annotations

import itertools
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from mqcluster.broker.messaging import properties as p
from mqcluster.broker.messaging.access import ANONYMOUS, Caller, TopicAccess
from mqcluster.broker.messaging.clock import Clock
from mqcluster.broker.messaging.delay import DelayService, encode_recall_handle
from mqcluster.broker.messaging.kinds import MessageKind
from mqcluster.broker.messaging.message_id import MessageIdGenerator
from mqcluster.broker.messaging.refusal import Reason, Refusal
from mqcluster.broker.messaging.send_checks import (
    FieldLimits,
    MessageLimits,
    check_bodies,
    check_fields,
    check_kind,
    check_queue_id,
    check_send_topic,
    check_sys_flag,
    check_timing,
)
from mqcluster.broker.messaging.store_port import BatchLog, MessageLog
from mqcluster.broker.messaging.transaction import TransactionService
from mqcluster.protocol.messages import RawMessages, WireMessage
from mqcluster.store.batch import RawBatch
from mqcluster.store.codec import offset_msg_id
from mqcluster.store.filter import tags_code
from mqcluster.store.message import MessageRecord, PutResult, PutStatus


@dataclass
class OutgoingMessage:
    """One message as a gRPC producer hands it over; times in milliseconds."""

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


@dataclass
class SendRequest:
    """One remoting send: a message or a batch for one queue (``-1``: the broker picks)."""

    topic: str
    messages: Sequence[WireMessage]
    queue_id: int = -1
    producer_group: str = ""
    born_host: str = ""
    born_timestamp: int = 0
    sys_flag: int = 0
    reconsume_times: int = 0
    default_queue_nums: int | None = None
    raw: RawMessages | None = None
    """A batch kept in its encoded form; used instead of ``messages`` when set."""

    @property
    def bodies(self) -> list[bytes]:
        return self.raw.bodies if self.raw is not None else [m.body for m in self.messages]

    @property
    def caller(self) -> Caller:
        return Caller(self.producer_group, self.born_host)


@dataclass
class SendOutcome:
    """What became of a send: refused (``refusal``), or written with the store's
    ``status`` (stored but not everywhere yet when not PUT_OK, see ``PutStatus.stored``)."""

    refusal: Refusal | None = None
    status: PutStatus = PutStatus.PUT_OK
    remark: str = ""
    """The store's own reason when ``status`` is not PUT_OK (may be empty)."""
    queue_id: int = -1
    queue_offset: int = -1
    """Queue offset of the first message."""
    offset_msg_ids: list[str] = field(default_factory=list)
    message_id: str = ""
    transaction_id: str = ""
    recall_handle: str = ""

    @property
    def ok(self) -> bool:
        return self.refusal is None and self.status is PutStatus.PUT_OK


class PutMetrics(Protocol):
    """``BrokerMetrics`` fits."""

    def record_puts(self, stored: dict[str, tuple[int, int]], requests: int,
                    seconds: float) -> None: ...

    def record_put_error(self, status: str) -> None: ...


def _tags_codes(tags: list[str | None]) -> list[int]:
    if not any(tags):
        return [0] * len(tags)
    return [tags_code(t) if t else 0 for t in tags]


class SendService:
    """``limits`` is read on every send (a runtime config change applies at once);
    ``fields`` bounds a gRPC message's own fields; ``batches`` is the real store's
    batched writes (remoting's encoded batches need it); ``delay`` and
    ``transactions``, when given, take delayed and transactional messages."""

    def __init__(self, log: MessageLog, access: TopicAccess, *,
                 limits: Callable[[], MessageLimits], clock: Clock,
                 fields: FieldLimits | None = None, batches: BatchLog | None = None,
                 metrics: PutMetrics | None = None, delay: DelayService | None = None,
                 transactions: TransactionService | None = None) -> None:
        self._log = log
        self.access = access
        self._limits = limits
        self._clock = clock
        self._fields = fields
        self._batches = batches
        self._metrics = metrics
        self._delay = delay
        self._transactions = transactions
        self._ids = MessageIdGenerator()
        self._round_robin: dict[str, itertools.count[int]] = {}

    # ---- shared by both forms of a send -----------------------------------------

    def _refused(self, refusal: Refusal) -> SendOutcome:
        if self._metrics is not None:
            self._metrics.record_put_error(refusal.reason.value)
        return SendOutcome(refusal)

    def _queue_for(self, topic: str, message_group: str | None, queue_nums: int) -> int:
        """Messages of one group to one queue (FIFO); the others round robin."""
        if message_group is not None:
            return zlib.crc32(message_group.encode()) % queue_nums
        counter = self._round_robin.get(topic)
        if counter is None:
            counter = self._round_robin[topic] = itertools.count()
        return next(counter) % queue_nums

    def _count(self, stored: dict[str, tuple[int, int]], requests: int, started: float) -> None:
        if self._metrics is not None and requests:
            self._metrics.record_puts(stored, requests, time.perf_counter() - started)

    def _store_failed(self, status: PutStatus) -> None:
        if self._metrics is not None:
            self._metrics.record_put_error(status.value)

    async def _visible(self, next_commitlog_offset: int) -> None:
        """A remoting send is answered once its message can be pulled (unless replication
        confirms first: controller and DLedger modes dispatch what the replicas hold); a
        gRPC consumer's receive waits for the arrival itself, so a gRPC send does not."""
        b = self._batches
        if b is not None and b.confirm_offset is None:
            await b.wait_dispatched(next_commitlog_offset)

    # ---- one message (gRPC) -------------------------------------------------------

    def validate(self, msg: OutgoingMessage) -> None:
        """Raise Refusal for what the message itself gets wrong."""
        fields = self._fields
        assert fields is not None, "a SendService for messages needs their field limits"
        check_send_topic(msg.topic)
        check_bodies((msg.body,), self._limits().maxMessageSize)
        check_fields(msg.tag, msg.keys, msg.message_group, msg.message_id, msg.trace_context,
                     msg.user_properties, fields)
        check_timing(msg.kind, msg.message_group, msg.delivery_timestamp_ms,
                     self._clock.now_ms(), fields)

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

    async def send(self, msg: OutgoingMessage, caller: Caller = ANONYMOUS) -> SendOutcome:
        try:
            self.validate(msg)
            topic = self.access.for_write(msg.topic, caller)
            check_kind(msg.kind, topic)
        except Refusal as refusal:
            return self._refused(refusal)
        message_id = msg.message_id or self._ids.next(self._clock.now_ms())
        queue_id = self._queue_for(msg.topic, msg.message_group, max(1, topic.writeQueueNums))
        rec = self._record(msg, queue_id, message_id)
        started = time.perf_counter()
        tid = recall = ""
        due = msg.delivery_timestamp_ms
        if msg.kind is MessageKind.TRANSACTION:
            if self._transactions is None:
                return self._refused(Refusal(Reason.UNSUPPORTED,
                                             "transactions are not served here"))
            result, tid = await self._transactions.prepare(rec)
        elif due is not None and due > self._clock.now_ms():
            if self._delay is None:
                return self._refused(Refusal(Reason.UNSUPPORTED,
                                             "delayed messages are not served here"))
            result = await self._delay.schedule(rec, due)
            recall = encode_recall_handle(result.queue_offset, message_id)
        else:
            result = await self._log.put_message(rec)
        return self._answer(msg.topic, len(msg.body), queue_id, result, started,
                            message_id=message_id, transaction_id=tid, recall_handle=recall)

    def _answer(self, topic: str, nbytes: int, queue_id: int, result: PutResult,
                started: float, **ids: str) -> SendOutcome:
        status = result.status
        if status.stored:
            self._count({topic: (1, nbytes)}, 1, started)
        if status is not PutStatus.PUT_OK:
            self._store_failed(status)
            return SendOutcome(None, status, result.remark, queue_id)
        return SendOutcome(None, status, "", queue_id, result.queue_offset, [], **ids)

    # ---- requests read together (remoting) --------------------------------------------

    def _place(self, req: SendRequest) -> int:
        """The queue the request's messages go to; Refusal when they may not be sent."""
        check_send_topic(req.topic)
        check_sys_flag(req.sys_flag)
        check_bodies(req.bodies, self._limits().maxMessageSize)
        topic = self.access.for_write(req.topic, req.caller, req.default_queue_nums)
        if req.queue_id < 0:
            return self._queue_for(req.topic, None, max(1, topic.writeQueueNums))
        check_queue_id(req.queue_id, topic)
        return req.queue_id

    async def send_many(self, reqs: Sequence[SendRequest]) -> list[SendOutcome]:
        """Requests that arrived together (a pipelining producer's burst): the batches
        kept in their encoded form are stored with one store write and one wait
        (``MessageStore.put_batches``); the others one by one."""
        outcomes: list[SendOutcome | None] = [None] * len(reqs)
        raw: list[tuple[int, RawBatch]] = []
        others: list[tuple[int, SendRequest, int]] = []
        for i, req in enumerate(reqs):
            try:
                queue_id = self._place(req)
            except Refusal as refusal:
                outcomes[i] = self._refused(refusal)
                continue
            if req.raw is not None and self._batches is not None:
                raw.append((i, self._raw_batch(req, req.raw, queue_id)))
            else:
                others.append((i, req, queue_id))
        for i, req, queue_id in others:
            outcomes[i] = await self._send_records(req, queue_id)
        if raw:
            stored = await self._send_raw([batch for _, batch in raw])
            for (i, _), outcome in zip(raw, stored, strict=True):
                outcomes[i] = outcome
        return [o for o in outcomes if o is not None]

    async def _send_records(self, req: SendRequest, queue_id: int) -> SendOutcome:
        records = self._records(req, queue_id)
        started = time.perf_counter()
        if len(records) == 1:
            results = [await self._log.put_message(records[0])]
        else:
            results = await self._log.put_messages(records)
        if results and results[-1].status.stored:
            await self._visible(results[-1].next_commitlog_offset)
        status = results[0].status if results else PutStatus.UNKNOWN_ERROR
        if status.stored:
            self._count({req.topic: (len(records), sum(len(m.body) for m in req.messages))},
                        1, started)
        if status is not PutStatus.PUT_OK:
            self._store_failed(status)
            return SendOutcome(None, status, results[0].remark if results else "", queue_id)
        return SendOutcome(None, status, "", queue_id, results[0].queue_offset,
                           [r.offset_msg_id for r in results])

    def _raw_batch(self, req: SendRequest, raw: RawMessages, queue_id: int) -> RawBatch:
        return RawBatch(
            req.topic, queue_id, req.born_host, req.born_timestamp or self._clock.now_ms(),
            raw.bodies, raw.properties, _tags_codes(raw.tags), raw.flags,
            req.sys_flag, req.reconsume_times,
        )  # fmt: skip

    async def _send_raw(self, batches: list[RawBatch]) -> list[SendOutcome]:
        """Batches appended as vectorized store writes (``MessageStore.put_batches``)."""
        store = self._batches
        assert store is not None
        started = time.perf_counter()
        results = await store.put_batches(batches)
        ends = [r.next_commitlog_offset for r in results if r.status.stored]
        if ends:
            await self._visible(max(ends))
        prefix = offset_msg_id(store.config.storeHost, 0)[:-16]
        stored: dict[str, tuple[int, int]] = {}
        requests = 0
        outcomes = []
        ok = PutStatus.PUT_OK  # (an Enum lookup, hoisted)
        for batch, result in zip(batches, results, strict=True):
            status = result.status
            if status.stored:
                count, nbytes = stored.get(batch.topic, (0, 0))
                stored[batch.topic] = (count + len(batch.bodies),
                                       nbytes + sum(map(len, batch.bodies)))
                requests += 1
            if status is not ok:
                self._store_failed(status)
                if not status.stored:
                    outcomes.append(SendOutcome(None, status, result.remark, batch.queue_id))
                    continue
            ids = [f"{prefix}{off:016X}" for off in result.commitlog_offsets]
            outcomes.append(SendOutcome(None, status, "", batch.queue_id, result.queue_offset, ids))
        self._count(stored, requests, started)
        return outcomes

    def _records(self, req: SendRequest, queue_id: int) -> list[MessageRecord]:
        """The request's messages as store records; the records share the messages' lists."""
        topic, born_host = req.topic, req.born_host
        born = req.born_timestamp or self._clock.now_ms()
        sys_flag, reconsume = req.sys_flag, req.reconsume_times
        return [
            MessageRecord(topic, queue_id, m.body, m.tags, m.keys, m.properties, born,
                          born_host, m.flag, sys_flag, reconsume)
            for m in req.messages
        ]
