"""A broker's gRPC endpoint over a real MessageStore, on its own event-loop thread.

The official client blocks its calling thread on futures run by its own I/O thread,
so the server must not share the test's thread: ``BrokerThread`` runs the store and
the endpoint on a private loop and ``call()`` runs coroutines there.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from mqcluster.broker.grpc import GrpcEndpoint, start_grpc_server
from mqcluster.broker.messaging.config import MessagingConfig
from mqcluster.broker.metrics import BrokerMetrics
from mqcluster.store import MessageStore, StoreConfig

T = TypeVar("T")


@dataclass
class Addresses:
    grpc: str | None = None


@dataclass
class Host:
    config: MessagingConfig
    store: MessageStore
    broker_name: str = "broker-a"
    cluster_name: str = "DefaultCluster"
    broker_id: int = 0
    addresses: Addresses = field(default_factory=Addresses)
    metrics: BrokerMetrics = field(default_factory=lambda: BrokerMetrics("c", "broker-a"))
    topic_changes: int = 0

    def topics_changed(self) -> None:
        self.topic_changes += 1


def loopback_host() -> str:
    return f"127.0.0.{random.randint(2, 250)}"


class BrokerThread:
    def __init__(self, root: Path, config: MessagingConfig) -> None:
        self.root = root
        self.config = config
        self.host_ip = loopback_host()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="broker-loop",
                                        daemon=True)
        self.store: MessageStore | None = None
        self.endpoint: GrpcEndpoint | None = None
        self.ctx: Host | None = None

    @property
    def address(self) -> str:
        assert self.endpoint is not None
        return f"{self.host_ip}:{self.endpoint.port}"

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def run(self, fn: Any, *args: Any) -> Any:
        async def invoke() -> Any:
            return fn(*args)
        return self.call(invoke())

    async def _start(self) -> None:
        self.store = MessageStore(StoreConfig(storePathRootDir=str(self.root),
                                              brokerName=self.config.brokerName))
        await self.store.start()
        self.ctx = Host(self.config, self.store, broker_name=self.config.brokerName)
        self.endpoint = await start_grpc_server(self.ctx, self.host_ip, 0, config=self.config)

    async def _stop(self) -> None:
        if self.endpoint is not None:
            await self.endpoint.stop(0.5)
        if self.store is not None:
            await self.store.shutdown()

    def start(self) -> BrokerThread:
        self._thread.start()
        try:
            self.call(self._start())
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        try:
            if self._thread.is_alive():
                self.call(self._stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            if not self._thread.is_alive():
                self.loop.close()
