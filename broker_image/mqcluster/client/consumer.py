"""Pull consumer: pulls queues explicitly, or ``receive`` across a topic's queues."""

from __future__ import annotations

from mqcluster.auth.credentials import Credentials
from mqcluster.client.broker_api import DEFAULT_TIMEOUT, BrokerApi
from mqcluster.client.message import MessageQueue, PullResult
from mqcluster.client.route import RouteResolver
from mqcluster.protocol.broker import PullMessageRequestHeader
from mqcluster.protocol.messages import PulledMessage


class PullConsumer:
    """A consumer group member that manages its own positions.

    ``pull`` is the low-level call (queue, offset). ``receive`` keeps a position
    per queue, starting from the group's committed offset (or the queue's min
    offset), and returns the next messages of the topic from any queue;
    ``commit`` stores those positions on the brokers.
    """

    def __init__(
        self,
        group: str,
        *,
        namesrv_addr: str | None = None,
        broker_addr: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        credentials: Credentials | None = None,
    ) -> None:
        self.group = group
        self.api = BrokerApi(timeout=timeout, credentials=credentials)
        self.routes = RouteResolver(self.api, namesrv_addr=namesrv_addr, broker_addr=broker_addr)
        self.positions: dict[MessageQueue, int] = {}
        self._committed: dict[MessageQueue, int] = {}
        self._turn = 0

    async def __aenter__(self) -> PullConsumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.api.close()

    async def queues(self, topic: str) -> list[MessageQueue]:
        route = await self.routes.route(topic)
        return list(route.read_queues)

    async def _addr(self, queue: MessageQueue) -> str:
        route = await self.routes.route(queue.topic)
        return route.addr_of(queue)

    async def pull(
        self,
        queue: MessageQueue,
        offset: int,
        max_nums: int = 32,
        expression: str = "*",
        suspend_ms: int = 0,
    ) -> PullResult:
        header = PullMessageRequestHeader(
            consumerGroup=self.group,
            topic=queue.topic,
            queueId=queue.queue_id,
            queueOffset=offset,
            maxMsgNums=max_nums,
            suspendTimeoutMillis=suspend_ms,
            subscription=expression,
        )
        return await self.api.pull(await self._addr(queue), header)

    async def committed_offset(self, queue: MessageQueue) -> int | None:
        addr = await self._addr(queue)
        return await self.api.query_consumer_offset(addr, self.group, queue.topic, queue.queue_id)

    async def commit_offset(self, queue: MessageQueue, offset: int) -> None:
        addr = await self._addr(queue)
        await self.api.update_consumer_offset(addr, self.group, queue.topic, queue.queue_id, offset)
        self._committed[queue] = offset

    async def max_offset(self, queue: MessageQueue) -> int:
        return await self.api.max_offset(await self._addr(queue), queue.topic, queue.queue_id)

    async def min_offset(self, queue: MessageQueue) -> int:
        return await self.api.min_offset(await self._addr(queue), queue.topic, queue.queue_id)

    async def _position(self, queue: MessageQueue) -> int:
        pos = self.positions.get(queue)
        if pos is None:
            committed = await self.committed_offset(queue)
            pos = committed if committed is not None else await self.min_offset(queue)
            self.positions[queue] = pos
            if committed is not None:
                self._committed[queue] = committed
        return pos

    async def receive(
        self, topic: str, max_nums: int = 32, expression: str = "*", wait_ms: int = 0
    ) -> list[PulledMessage]:
        """The next messages of ``topic``; empty when every queue is drained.

        Queues are tried in turn; ``wait_ms`` long-polls the last queue tried
        when all of them were empty.
        """
        queues = await self.queues(topic)
        for i in range(len(queues)):
            queue = queues[(self._turn + i) % len(queues)]
            last = i == len(queues) - 1
            result = await self.pull(
                queue,
                await self._position(queue),
                max_nums,
                expression,
                suspend_ms=wait_ms if last else 0,
            )
            self.positions[queue] = result.next_begin_offset
            if result.messages:
                self._turn = (self._turn + i + 1) % len(queues)
                return result.messages
        return []

    async def commit(self) -> None:
        """Store the position of every queue that moved since the last commit."""
        for queue, pos in list(self.positions.items()):
            if self._committed.get(queue) != pos:
                await self.commit_offset(queue, pos)
