"""The name server process core: RPC server, route tables, expiry scan."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from mqcluster.namesrv.config import NamesrvConfig
from mqcluster.namesrv.processor import NamesrvProcessor, log_removed
from mqcluster.namesrv.route_info import Clock, RouteInfoManager, monotonic_ms
from mqcluster.wire.rpc import HandlerRegistry, RpcServer

log = logging.getLogger(__name__)


class NamesrvServer:
    def __init__(
        self,
        config: NamesrvConfig,
        *,
        clock: Clock = monotonic_ms,
        registry: HandlerRegistry | None = None,
    ) -> None:
        self.config = config
        self.routes = RouteInfoManager(
            clock,
            broker_channel_expired_ms=config.brokerChannelExpiredTime,
            support_acting_master=config.supportActingMaster,
            delete_topic_with_broker_registration=config.deleteTopicWithBrokerRegistration,
        )
        self.registry = registry or HandlerRegistry()
        NamesrvProcessor(self.routes).install(self.registry)
        self.rpc = RpcServer(config.bindAddress, config.listenPort, self.registry,
                             limits=config.server_limits())
        self._scan_task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        return self.rpc.port

    @property
    def address(self) -> str:
        return f"{self.config.bindAddress}:{self.rpc.port}"

    async def start(self) -> None:
        await self.rpc.start()
        self._scan_task = asyncio.create_task(self._scan_loop(), name="namesrv-scan")

    async def _scan_loop(self) -> None:
        interval = self.config.scanNotActiveBrokerInterval / 1000
        while True:
            await asyncio.sleep(interval)
            log_removed(self.routes.scan_not_active_brokers())

    async def stop(self) -> None:
        task, self._scan_task = self._scan_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.rpc.stop()
