"""Producer: sends single messages and batches, choosing queues round robin."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Iterator, Sequence

from mqcluster.broker.protocol import BrokerResponseCode, SendMessageResponseHeader
from mqcluster.client.broker_api import DEFAULT_TIMEOUT, BrokerApi
from mqcluster.client.errors import BrokerError, ClientError
from mqcluster.client.message import Message, MessageQueue, SendResult
from mqcluster.client.route import NoRouteError, RouteResolver, TopicRoute
from mqcluster.store.message import PROPERTY_UNIQ_KEY

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
    ) -> None:
        self.group = group
        self.retries = retries
        self.default_queue_nums = default_queue_nums
        self.api = BrokerApi(timeout=timeout)
        self.routes = RouteResolver(
            self.api,
            namesrv_addr=namesrv_addr,
            broker_addr=broker_addr,
            default_queue_nums=default_queue_nums,
        )
        self._counters: dict[str, Iterator[int]] = {}

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
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
        results = await self._send(msg.topic, [msg], queue, batch=False)
        return results[0]

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

    async def _send(
        self, topic: str, msgs: list[Message], queue: MessageQueue | None, *, batch: bool
    ) -> list[SendResult]:
        for m in msgs:
            m.properties.setdefault(PROPERTY_UNIQ_KEY, new_unique_key())
        wires = [m.to_wire() for m in msgs]
        avoid: str | None = None
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            route = await self.routes.route(topic, for_write=True)
            target = queue or self._next_queue(route, avoid)
            addr = route.addr_of(target)
            born = int(time.time() * 1000)
            try:
                if batch:
                    header = await self.api.send_batch(
                        addr,
                        topic,
                        wires,
                        target.queue_id,
                        producer_group=self.group,
                        born_timestamp=born,
                        default_queue_nums=self.default_queue_nums,
                    )
                else:
                    header = await self.api.send(
                        addr,
                        topic,
                        wires[0],
                        target.queue_id,
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


def _results(
    msgs: list[Message], queue: MessageQueue, addr: str, header: SendMessageResponseHeader
) -> list[SendResult]:
    offset_ids = header.msgId.split(",") if header.msgId else []
    results = []
    target = MessageQueue(queue.topic, queue.broker_name, header.queueId)
    for i, m in enumerate(msgs):
        results.append(
            SendResult(
                msg_id=m.properties[PROPERTY_UNIQ_KEY],
                queue=target,
                queue_offset=header.queueOffset + i,
                offset_msg_id=offset_ids[i] if i < len(offset_ids) else "",
                broker_addr=addr,
            )
        )
    return results
