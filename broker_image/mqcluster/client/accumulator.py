"""Auto-batching of concurrent sends (RocketMQ 5's ``autoBatch`` / ``ProduceAccumulator``).

Messages handed to ``add`` during one turn of the event loop are sent together as
SEND_BATCH_MESSAGE requests, one per topic, split at ``max_messages`` or
``max_bytes`` of bodies. No message waits for a timer: a batch leaves at the end of
the loop turn that started it. Each caller gets its own message's result only once
the broker has answered the whole request, so SYNC_FLUSH acknowledgements still
mean "on disk". A batch refused as a whole before anything was stored (``refused_unsent``
says which errors guarantee that) is retried message by message, so one bad message
fails only its own sender.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from mqcluster.client.message import Message, SendResult

SendBatch = Callable[[str, list[Message]], Awaitable[list[SendResult]]]
Refused = Callable[[Exception], bool]

DEFAULT_MAX_MESSAGES = 256
DEFAULT_MAX_BYTES = 1024 * 1024


class SendAccumulator:
    def __init__(
        self,
        send_batch: SendBatch,
        refused_unsent: Refused,
        *,
        max_messages: int = DEFAULT_MAX_MESSAGES,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self._send_batch = send_batch
        self._refused_unsent = refused_unsent
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self._pending: dict[str, list[tuple[Message, asyncio.Future[SendResult]]]] = {}
        self._scheduled = False
        self._tasks: set[asyncio.Task[None]] = set()

    def add(self, msg: Message) -> asyncio.Future[SendResult]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[SendResult] = loop.create_future()
        self._pending.setdefault(msg.topic, []).append((msg, fut))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return fut

    def _flush(self) -> None:
        self._scheduled = False
        pending, self._pending = self._pending, {}
        for topic, items in pending.items():
            for chunk in self._split(items):
                task = asyncio.ensure_future(self._send(topic, chunk))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    def _split(
        self, items: list[tuple[Message, asyncio.Future[SendResult]]]
    ) -> list[list[tuple[Message, asyncio.Future[SendResult]]]]:
        chunks: list[list[tuple[Message, asyncio.Future[SendResult]]]] = [[]]
        size = 0
        for item in items:
            body = len(item[0].body)
            full = len(chunks[-1]) >= self.max_messages or size + body > self.max_bytes
            if chunks[-1] and full:
                chunks.append([])
                size = 0
            chunks[-1].append(item)
            size += body
        return chunks

    async def _send(
        self, topic: str, items: list[tuple[Message, asyncio.Future[SendResult]]]
    ) -> None:
        try:
            results = await self._send_batch(topic, [m for m, _ in items])
        except asyncio.CancelledError:
            for _, fut in items:
                fut.cancel()
            raise
        except Exception as exc:
            if len(items) > 1 and self._refused_unsent(exc):
                await asyncio.gather(*(self._send(topic, [item]) for item in items))
                return
            for _, fut in items:
                if not fut.done():
                    fut.set_exception(exc)
            return
        for (_, fut), result in zip(items, results, strict=True):
            if not fut.done():
                fut.set_result(result)

    async def close(self) -> None:
        """Wait for the requests already under way."""
        if self._pending:
            self._flush()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
