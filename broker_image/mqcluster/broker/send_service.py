"""Stores producers' messages: checks, queue choice, store put, metrics.

Used by the internal protocol's send handlers; the outcome carries the
RocketMQ response code so any front end can answer with it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from mqcluster.broker.context import BrokerContext
from mqcluster.broker.protocol import BrokerResponseCode
from mqcluster.broker.remoting_codec import RawMessages, WireMessage
from mqcluster.broker.topic_service import TopicRejection, TopicService
from mqcluster.store.batch import RawBatch
from mqcluster.store.codec import offset_msg_id
from mqcluster.store.filter import tags_code
from mqcluster.store.message import MessageRecord, PutResult, PutStatus

PUT_STATUS_CODES: dict[PutStatus, int] = {
    PutStatus.PUT_OK: BrokerResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: BrokerResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: BrokerResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: BrokerResponseCode.SLAVE_NOT_AVAILABLE,
    PutStatus.SERVICE_NOT_AVAILABLE: BrokerResponseCode.SERVICE_NOT_AVAILABLE,
    PutStatus.CREATE_MAPPED_FILE_FAILED: BrokerResponseCode.SYSTEM_ERROR,
    PutStatus.MESSAGE_ILLEGAL: BrokerResponseCode.MESSAGE_ILLEGAL,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: BrokerResponseCode.MESSAGE_ILLEGAL,
    PutStatus.OS_PAGE_CACHE_BUSY: BrokerResponseCode.SYSTEM_BUSY,
    PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH: BrokerResponseCode.SYSTEM_ERROR,
    PutStatus.UNKNOWN_ERROR: BrokerResponseCode.SYSTEM_ERROR,
}


@dataclass
class SendRequest:
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


@dataclass
class SendOutcome:
    code: int
    remark: str | None = None
    queue_id: int = -1
    results: list[PutResult] = field(default_factory=list)
    queue_offset: int = -1
    """Queue offset of the first message."""
    offset_msg_ids: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.code == BrokerResponseCode.SUCCESS


def _tags_codes(tags: list[str | None]) -> list[int]:
    if not any(tags):
        return [0] * len(tags)
    return [tags_code(t) if t else 0 for t in tags]


def _reject(code: int, remark: str) -> SendOutcome:
    return SendOutcome(code=code, remark=remark)


class SendService:
    def __init__(
        self, ctx: BrokerContext, topics: TopicService, rng: random.Random | None = None
    ) -> None:
        self.ctx = ctx
        self.topics = topics
        self._random = rng or random.Random()

    def _check_sizes(self, bodies: Sequence[bytes]) -> str | None:
        """Body limits; the store checks the properties' size (PROPERTIES_SIZE_EXCEEDED)."""
        limit = self.ctx.config.maxMessageSize
        total = 0
        for i, body in enumerate(bodies):
            if not body:
                return f"message {i} has an empty body"
            if len(body) > limit:
                return f"message body of {len(body)} bytes exceeds maxMessageSize {limit}"
            total += len(body)
        if len(bodies) > 1 and total > limit:
            return f"batch body of {total} bytes exceeds maxMessageSize {limit}"
        return None

    def _place(self, req: SendRequest) -> SendOutcome | int:
        """The queue the request's messages go to, or why it is refused."""
        bodies = req.raw.bodies if req.raw is not None else [m.body for m in req.messages]
        if not bodies:
            return _reject(BrokerResponseCode.MESSAGE_ILLEGAL, "no message to send")
        problem = self._check_sizes(bodies)
        if problem is not None:
            self.ctx.metrics.record_put_error("MESSAGE_ILLEGAL")
            return _reject(BrokerResponseCode.MESSAGE_ILLEGAL, problem)
        topic = self.topics.for_write(req.topic, req.default_queue_nums)
        if isinstance(topic, TopicRejection):
            self.ctx.metrics.record_put_error(BrokerResponseCode(topic.code).name)
            return _reject(topic.code, topic.remark)
        queue_id = req.queue_id
        if queue_id < 0:
            return self._random.randrange(topic.writeQueueNums)
        if queue_id >= topic.writeQueueNums:
            return _reject(
                BrokerResponseCode.INVALID_REQUEST,
                f"queueId={queue_id} is illegal: topic {req.topic!r} has "
                f"{topic.writeQueueNums} write queues",
            )
        return queue_id

    async def send_many(self, reqs: Sequence[SendRequest]) -> list[SendOutcome]:
        """Requests that arrived together (a pipelining producer's burst): the batches
        kept in their encoded form are stored with one store write and one wait
        (``MessageStore.put_batches``); the others one by one."""
        outcomes: list[SendOutcome | None] = [None] * len(reqs)
        raw: list[tuple[int, RawBatch]] = []
        others: list[tuple[int, SendRequest, int]] = []
        for i, req in enumerate(reqs):
            placed = self._place(req)
            if isinstance(placed, SendOutcome):
                outcomes[i] = placed
            elif req.raw is not None:
                raw.append((i, self._raw_batch(req, req.raw, placed)))
            else:
                others.append((i, req, placed))
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
            results = [await self.ctx.store.put_message(records[0])]
        else:
            results = await self.ctx.store.put_messages(records)
        if results and results[-1].status.stored and self.ctx.store.confirm_offset is None:
            await self.ctx.store.wait_dispatched(results[-1].next_commitlog_offset)
        elapsed = time.perf_counter() - started
        status = results[0].status if results else PutStatus.UNKNOWN_ERROR
        code = PUT_STATUS_CODES.get(status, BrokerResponseCode.SYSTEM_ERROR)
        if status.stored:
            nbytes = sum(len(m.body) for m in req.messages)
            self.ctx.metrics.record_put(req.topic, len(records), nbytes, elapsed)
        if code != BrokerResponseCode.SUCCESS:
            self.ctx.metrics.record_put_error(status.value)
            remark = results[0].remark if results else ""
            return SendOutcome(code, remark or f"store answered {status.value}", queue_id, results)
        return SendOutcome(
            code, None, queue_id, results, results[0].queue_offset,
            [r.offset_msg_id for r in results],
        )  # fmt: skip

    @staticmethod
    def _raw_batch(req: SendRequest, raw: RawMessages, queue_id: int) -> RawBatch:
        return RawBatch(
            req.topic, queue_id, req.born_host, req.born_timestamp or int(time.time() * 1000),
            raw.bodies, raw.properties, _tags_codes(raw.tags), raw.flags,
            req.sys_flag, req.reconsume_times,
        )  # fmt: skip

    async def _send_raw(self, batches: list[RawBatch]) -> list[SendOutcome]:
        """Batches appended as vectorized store writes (``MessageStore.put_batches``)."""
        store = self.ctx.store
        started = time.perf_counter()
        results = await store.put_batches(batches)
        ends = [r.next_commitlog_offset for r in results if r.status.stored]
        if ends and store.confirm_offset is None:
            await store.wait_dispatched(max(ends))
        elapsed = time.perf_counter() - started
        prefix = offset_msg_id(store.config.storeHost, 0)[:-16]
        metrics = self.ctx.metrics
        stored: dict[str, tuple[int, int]] = {}
        requests = 0
        outcomes = []
        ok, success = PutStatus.PUT_OK, BrokerResponseCode.SUCCESS  # (Enum lookups, hoisted)
        for batch, result in zip(batches, results, strict=True):
            status = result.status
            code = success if status is ok else PUT_STATUS_CODES.get(
                status, BrokerResponseCode.SYSTEM_ERROR)
            if status.stored:
                count, nbytes = stored.get(batch.topic, (0, 0))
                stored[batch.topic] = (count + len(batch.bodies),
                                       nbytes + sum(map(len, batch.bodies)))
                requests += 1
            remark = None
            if code != success:
                metrics.record_put_error(status.value)
                remark = f"store answered {status.value}"
                if not status.stored:
                    outcomes.append(_reject(code, result.remark or remark))
                    continue
            ids = [f"{prefix}{off:016X}" for off in result.commitlog_offsets]
            outcomes.append(SendOutcome(code, remark, batch.queue_id, [], result.queue_offset, ids))
        if requests:
            metrics.record_puts(stored, requests, elapsed)
        return outcomes

    @staticmethod
    def _records(req: SendRequest, queue_id: int) -> list[MessageRecord]:
        """The request's messages as store records; the records share the messages' lists."""
        topic, born_host = req.topic, req.born_host
        born = req.born_timestamp or int(time.time() * 1000)
        sys_flag, reconsume = req.sys_flag, req.reconsume_times
        return [
            MessageRecord(
                topic,
                queue_id,
                m.body,
                m.tags,
                m.keys,
                m.properties,
                born,
                born_host,
                m.flag,
                sys_flag,
                reconsume,
            )
            for m in req.messages
        ]
