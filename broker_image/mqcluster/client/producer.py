"""Producer: sends single messages and batches, choosing queues round robin."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Iterator, Sequence

from mqcluster.auth.credentials import Credentials
from mqcluster.client.accumulator import SendAccumulator
from mqcluster.client.broker_api import DEFAULT_TIMEOUT, BrokerApi
from mqcluster.client.errors import BrokerError, ClientError
from mqcluster.client.message import Message, MessageQueue, SendResult
from mqcluster.client.route import NoRouteError, RouteResolver, TopicRoute
from mqcluster.client.uniq_key import UniqKeyGenerator
from mqcluster.protocol.broker import BrokerResponseCode, SendMessageResponseHeader
from mqcluster.protocol.messages import (
    CodecError,
    encode_batch_entry,
    encode_properties,
    properties_bytes,
)
from mqcluster.protocol.properties import (
    KEY_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
)

RETRYABLE_CODES = frozenset(
    {
        BrokerResponseCode.SYSTEM_ERROR,
        BrokerResponseCode.SYSTEM_BUSY,
        BrokerResponseCode.SERVICE_NOT_AVAILABLE,
        BrokerResponseCode.TOPIC_NOT_EXIST,
    }
)


def new_unique_key() -> str:
    """A 32-hex-digit message id, like RocketMQ's client-side ``UNIQ_KEY``."""
    return uuid.uuid4().hex.upper()


class Producer:
    """Sends to the master of each queue; ``retries`` extra attempts go to the next queue.

    A retry after a lost answer can store a message twice (RocketMQ's
    at-least-once); pass ``retries=0`` where every answer must be exact.
    """

    def __init__(
        self,
        group: str = "DEFAULT_PRODUCER",
        *,
        namesrv_addr: str | None = None,
        broker_addr: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 2,
        default_queue_nums: int = 4,
        auto_batch: bool = False,
        credentials: Credentials | None = None,
    ) -> None:
        self.group = group
        self.retries = retries
        self.default_queue_nums = default_queue_nums
        self.api = BrokerApi(timeout=timeout, credentials=credentials)
        self.routes = RouteResolver(
            self.api,
            namesrv_addr=namesrv_addr,
            broker_addr=broker_addr,
            default_queue_nums=default_queue_nums,
        )
        self._counters: dict[str, Iterator[int]] = {}
        self._keys = UniqKeyGenerator()
        self._accumulator = (
            SendAccumulator(self._send_auto_batch, _refused_unsent) if auto_batch else None
        )

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._accumulator is not None:
            await self._accumulator.close()
        await self.api.close()

    def _next_queue(self, route: TopicRoute, avoid: str | None) -> MessageQueue:
        queues = route.write_queues
        if not queues:
            raise NoRouteError(f"topic {route.topic!r} has no writable queue")
        counter = self._counters.setdefault(route.topic, itertools.count())
        for _ in range(len(queues)):
            queue = queues[next(counter) % len(queues)]
            if queue.broker_name != avoid:
                return queue
        return queues[next(counter) % len(queues)]

    async def send(self, msg: Message, queue: MessageQueue | None = None) -> SendResult:
        """With ``auto_batch``, sends made in the same loop turn share one batch request."""
        acc = self._accumulator
        if acc is not None and queue is None and 0 < len(msg.body) <= acc.max_bytes:
            return await acc.add(msg)
        results = await self._send(msg.topic, [msg], queue, batch=False)
        return results[0]

    async def _send_auto_batch(self, topic: str, msgs: list[Message]) -> list[SendResult]:
        return await self._send(topic, msgs, None, batch=len(msgs) > 1)

    async def send_batch(
        self, msgs: Sequence[Message], queue: MessageQueue | None = None
    ) -> list[SendResult]:
        """One request; all messages go to one queue with consecutive offsets."""
        if not msgs:
            return []
        topics = {m.topic for m in msgs}
        if len(topics) != 1:
            raise ClientError(f"a batch must have one topic, got {sorted(topics)}")
        return await self._send(msgs[0].topic, list(msgs), queue, batch=True)

    def _assign_keys(self, msgs: Sequence[Message]) -> None:
        if len(msgs) == 1:
            props = msgs[0].properties
            if PROPERTY_UNIQ_KEY not in props:
                props[PROPERTY_UNIQ_KEY] = self._keys.next_key()
            return
        missing = [m for m in msgs if PROPERTY_UNIQ_KEY not in m.properties]
        if missing:
            for m, key in zip(missing, self._keys.next_keys(len(missing)), strict=True):
                m.properties[PROPERTY_UNIQ_KEY] = key

    async def _send(
        self, topic: str, msgs: list[Message], queue: MessageQueue | None, *, batch: bool
    ) -> list[SendResult]:
        self._assign_keys(msgs)
        single = msgs[0]
        if batch:
            try:
                payload = encode_batch_entries(msgs)
            except CodecError as exc:
                raise ClientError(str(exc)) from exc
            props = ""
        else:
            payload = single.body
            props = encode_properties(message_properties(single))
        avoid: str | None = None
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            route = (self.routes.cached(topic)
                     or await self.routes.route(topic, for_write=True))
            target = queue or self._next_queue(route, avoid)
            addr = route.addr_of(target)
            born = int(time.time() * 1000)
            try:
                if batch:
                    header = await self.api.send_batch_encoded(
                        addr,
                        topic,
                        payload,
                        target.queue_id,
                        producer_group=self.group,
                        born_timestamp=born,
                        default_queue_nums=self.default_queue_nums,
                    )
                else:
                    header = await self.api.send_encoded(
                        addr,
                        topic,
                        payload,
                        props,
                        target.queue_id,
                        flag=single.flag,
                        producer_group=self.group,
                        born_timestamp=born,
                        default_queue_nums=self.default_queue_nums,
                    )
            except BrokerError as exc:
                if exc.code not in RETRYABLE_CODES or attempt == self.retries:
                    raise
                last = exc
            except ClientError as exc:
                if attempt == self.retries:
                    raise
                last = exc
            else:
                return _results(msgs, target, addr, header)
            self.routes.invalidate(topic)
            avoid = target.broker_name
        raise ClientError(f"send to {topic!r} failed: {last}")


def _refused_unsent(exc: Exception) -> bool:
    """True for errors after which none of the request's messages can have been stored."""
    if isinstance(exc, BrokerError):
        return exc.code == BrokerResponseCode.MESSAGE_ILLEGAL
    return isinstance(exc, (CodecError, ClientError)) and isinstance(exc.__cause__, CodecError)


def message_properties(m: Message) -> dict[str, str]:
    """User properties plus TAGS and KEYS, as the properties string carries them."""
    if not m.tags and not m.keys:
        return m.properties
    props = dict(m.properties)
    if m.tags:
        props[PROPERTY_TAGS] = m.tags
    if m.keys:
        props[PROPERTY_KEYS] = KEY_SEPARATOR.join(m.keys)
    return props


def encode_batch_entries(msgs: Sequence[Message]) -> bytes:
    """The SEND_BATCH_MESSAGE body of ``msgs``."""
    return b"".join(
        [encode_batch_entry(m.body, properties_bytes(message_properties(m)), m.flag) for m in msgs]
    )


def _results(
    msgs: list[Message], queue: MessageQueue, addr: str, header: SendMessageResponseHeader
) -> list[SendResult]:
    target = (queue if header.queueId == queue.queue_id
              else MessageQueue(queue.topic, queue.broker_name, header.queueId))
    first = header.queueOffset
    if len(msgs) == 1:  # (one send: no id list to split and pad)
        offset_id = header.msgId.partition(",")[0]
        return [SendResult(msgs[0].properties[PROPERTY_UNIQ_KEY], target, first, offset_id, addr)]
    offset_ids = header.msgId.split(",") if header.msgId else []
    offset_ids += [""] * (len(msgs) - len(offset_ids))
    return [
        SendResult(m.properties[PROPERTY_UNIQ_KEY], target, first + i, offset_ids[i], addr)
        for i, m in enumerate(msgs)
    ]
