"""A broker's remoting handlers over a real store, called without sockets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

from mqcluster.broker.config import BrokerConfig
from mqcluster.broker.context import BrokerContext
from mqcluster.broker.handlers import build_registry
from mqcluster.broker.long_poll import ArrivalNotifier
from mqcluster.broker.store_factory import create_store
from mqcluster.protocol.broker import BrokerResponseCode
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.rpc import Connection, HandlerRegistry


class FakeConnection:
    peer = "127.0.0.9:40000"


class Broker:
    def __init__(self, ctx: BrokerContext, registry: HandlerRegistry) -> None:
        self.ctx = ctx
        self.registry = registry

    async def call(self, code: int, ext: dict[str, str] | None = None,
                   body: bytes | None = None) -> RemotingCommand:
        cmd = RemotingCommand(code=code, opaque=1, ext_fields=ext or {}, body=body)
        answer = await self.registry.dispatch(cmd, cast(Connection, FakeConnection()))
        assert answer is not None
        return answer

    async def served_codes(self) -> set[int]:
        """The request codes below 1200 that this broker answers (any answer but
        REQUEST_CODE_NOT_SUPPORTED), found by asking it each one."""
        served = set()
        for code in range(0, 1200):
            answer = await self.call(code)
            if answer.code != BrokerResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                served.add(code)
        return served

    def config_file(self, name: str) -> Path:
        return Path(self.ctx.config.storePathRootDir) / "config" / name


@asynccontextmanager
async def remoting_broker(root: Path, **config: Any) -> AsyncIterator[Broker]:
    cfg = BrokerConfig(brokerName="broker-a", storePathRootDir=str(root), **config)
    store = create_store(cfg)
    await store.start()
    ctx = BrokerContext.create(cfg, store)
    try:
        yield Broker(ctx, build_registry(ctx, ArrivalNotifier()))
    finally:
        await store.shutdown()
