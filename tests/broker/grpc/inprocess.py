"""The gRPC request handlers over a real store, called in-process with serialized
requests (what grpc hands the handlers), on a private event loop.

``call`` goes through the same parsing and error-to-status mapping as the server, so a
request that makes a handler raise anything but a MessagingError answers
INTERNAL_SERVER_ERROR, which the fuzz tests look for.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf.message import Message

from mqcluster.broker.grpc.routes import LocalRouteProvider
from mqcluster.broker.grpc.server import SERVICE_NAME, build_handler
from mqcluster.broker.grpc.servicer import MessagingServicer
from mqcluster.broker.messaging.clock import ManualClock
from mqcluster.broker.messaging.config import MessagingConfig
from mqcluster.broker.messaging.service import MessagingService
from mqcluster.store import MessageStore, StoreConfig
from mqcluster.store.topic_config import PERM_READ, PERM_WRITE


class _Context:
    """What the handlers read from a grpc.aio context. No time left for long polling:
    a receive that finds nothing answers at once."""

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("x-mq-client-id", "inprocess-client"),)

    def time_remaining(self) -> float:
        return 0.5


@dataclass
class _Details:
    method: str


class InProcessBroker:
    def __init__(self, root: Path, config: MessagingConfig | None = None) -> None:
        self.root = root
        self.config = config or MessagingConfig(brokerName="broker-a", defaultTopicQueueNums=2,
                                                minInvisibleTimeMillsForRecv=1000)
        self.loop = asyncio.new_event_loop()
        self.clock = ManualClock()
        self.broker_permission = PERM_READ | PERM_WRITE
        self.store = MessageStore(StoreConfig(storePathRootDir=str(root),
                                              brokerName=self.config.brokerName))
        self.run(self.store.start())
        self.service = MessagingService(self.store, self.config, clock=self.clock,
                                        broker_permission=lambda: self.broker_permission)
        self.service.load()
        routes = LocalRouteProvider(self.service.catalog, self.config.brokerName,
                                    advertised=("127.0.0.1", 8081))
        self.servicer = MessagingServicer(self.service, routes)
        self._handler = build_handler(self.servicer)

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        self.run(self.store.shutdown())
        self.loop.close()

    def call(self, method: str, request: Message | bytes, response_type: type[Message]) -> Any:
        """Every response of one call, parsed; one for a unary method."""
        handler = self._handler.service(_Details(f"/{SERVICE_NAME}/{method}"))  # type: ignore[arg-type]
        assert handler is not None, method
        raw = request if isinstance(request, bytes) else request.SerializeToString()
        if handler.unary_unary is not None:
            answer = self.run(handler.unary_unary(raw, _Context()))
            return [self._parse(answer, response_type, handler)]

        async def collect(stream: AsyncIterator[Any]) -> list[Any]:
            return [item async for item in stream]

        items = self.run(collect(handler.unary_stream(raw, _Context())))
        return [self._parse(i, response_type, handler) for i in items]

    @staticmethod
    def _parse(answer: Any, response_type: type[Message], handler: Any) -> Any:
        # (Responses go over the wire serialized: parse them back as a client would.)
        data = handler.response_serializer(answer)
        return response_type.FromString(data)
