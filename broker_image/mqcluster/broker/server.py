"""One broker process: store, internal RPC, HTTP metrics, gRPC endpoint, registration.

``start`` brings the parts up in dependency order; ``stop`` takes them down in
reverse: unregister first (clients stop being routed here), then stop taking
requests, then flush and close the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Callable
from typing import Any, Protocol

from mqcluster.broker.config import BrokerConfig
from mqcluster.broker.context import BrokerContext
from mqcluster.broker.dledger import DLedgerReplication
from mqcluster.broker.handlers import build_registry
from mqcluster.broker.http_server import HttpEndpoint
from mqcluster.broker.long_poll import ArrivalNotifier
from mqcluster.broker.master_slave import ClassicReplication
from mqcluster.broker.metrics import ReplicationView, ha_master_view
from mqcluster.broker.registration import start_registrar
from mqcluster.broker.replicas_manager import ReplicasManager
from mqcluster.broker.store_factory import create_store
from mqcluster.client.namesrv import BrokerRegistrar
from mqcluster.wire.limits import set_process_limits
from mqcluster.wire.rpc import RpcServer

log = logging.getLogger(__name__)


class Stoppable(Protocol):
    def stop(self) -> Any: ...


async def _start_grpc(ctx: BrokerContext, host: str, port: int) -> Stoppable | None:
    try:
        from mqcluster.broker.grpc import start_grpc_server
    except ImportError as exc:
        log.warning("gRPC endpoint not available in this build: %s", exc)
        return None
    endpoint: Stoppable = await start_grpc_server(ctx, host, port)
    return endpoint


def _sessions_of(endpoint: Stoppable) -> Callable[[], list[dict[str, Any]]]:
    def sessions() -> list[dict[str, Any]]:
        service = getattr(endpoint, "service", None)
        clients = getattr(service, "clients", None)
        return [] if clients is None else clients.describe()

    return sessions


class BrokerServer:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.ctx: BrokerContext | None = None
        self.arrivals = ArrivalNotifier()
        self.rpc: RpcServer | None = None
        self.http: HttpEndpoint | None = None
        self.grpc: Stoppable | None = None
        self.registrar: BrokerRegistrar | None = None
        self.replicas: ReplicasManager | None = None
        self.classic: ClassicReplication | None = None
        self.dledger: DLedgerReplication | None = None
        self._registering: asyncio.Task[None] | None = None
        self._store_closed = False

    @property
    def context(self) -> BrokerContext:
        if self.ctx is None:
            raise RuntimeError("broker not started")
        return self.ctx

    async def start(self) -> None:
        cfg = self.config
        limits = cfg.server_limits()
        # (also the limits of the DLedger Raft port, which the Raft runner opens itself)
        set_process_limits(limits)
        store = create_store(cfg)
        await store.start()
        ctx = self.ctx = BrokerContext.create(cfg, store)
        store.add_arrival_listener(self.arrivals.notify)
        registry = build_registry(ctx, self.arrivals)
        if cfg.enableControllerMode:
            self.replicas = ReplicasManager(ctx, registry)
            master = self.replicas.master
            ctx.metrics.replication = lambda: ha_master_view(master)
        elif cfg.enableDLegerCommitLog:
            self.dledger = DLedgerReplication(ctx, registry)
        else:
            self.classic = ClassicReplication(ctx)
            ctx.ha_lag = self.classic.lag_bytes
            ctx.metrics.replication = lambda: ReplicationView(
                lag_bytes=ctx.ha_lag(), master_offset=ctx.store.commitlog_max_offset)
        ctx.role_listeners.append(
            lambda old, new: ctx.metrics.role_changed(old.is_master, new.is_master))
        store.observe_flushes(ctx.metrics.flush_latency.labels(**ctx.metrics.labels).observe)
        gauge = ctx.metrics.connections.labels(**ctx.metrics.labels)
        registry.on_connection_closed.append(lambda _conn: gauge.dec())
        self.rpc = RpcServer(cfg.bindAddress, cfg.listenPort, registry, limits=limits,
                             on_accept=lambda _conn: gauge.inc())
        await self.rpc.start()
        if cfg.metrics_enabled:
            host = cfg.metricsPromExporterHost or cfg.bindAddress
            self.http = HttpEndpoint(ctx, host, cfg.metricsPromExporterPort)
            await self.http.start()
        if cfg.enableProxy:
            self.grpc = await _start_grpc(ctx, cfg.bindAddress, cfg.grpcServerPort)
            if self.grpc is None:
                ctx.addresses.grpc = None
            else:
                ctx.client_sessions = _sessions_of(self.grpc)
        if self.classic is not None:
            await self.classic.start()
        if self.dledger is not None:
            await self.dledger.start()
        if self.replicas is not None:
            await self.replicas.start()
            self._registering = asyncio.get_running_loop().create_task(
                self._register_once_role_known(self.replicas))
        else:
            self.registrar = start_registrar(ctx)
        ctx.serving = True

    async def _register_once_role_known(self, replicas: ReplicasManager) -> None:
        """Controller mode: the name servers hear of this broker once its role is known."""
        await replicas.wait_role()
        self.registrar = start_registrar(self.context)

    async def stop(self) -> None:
        if self.ctx is not None:
            self.ctx.serving = False
        if self._registering is not None:
            self._registering.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._registering
            self._registering = None
        if self.registrar is not None:
            try:
                await self.registrar.stop()
            except Exception as exc:
                log.warning("unregister from name servers failed: %s", exc)
            await self.registrar.client.close()
            self.registrar = None
        if self.grpc is not None:
            result = self.grpc.stop()
            if inspect.isawaitable(result):
                await result
            self.grpc = None
        self.arrivals.wake_all()
        if self.rpc is not None:
            await self.rpc.stop()
            self.rpc = None
        if self.http is not None:
            await self.http.stop()
            self.http = None
        if self.replicas is not None:
            await self.replicas.stop()
            self.replicas = None
        if self.classic is not None:
            await self.classic.stop()
            self.classic = None
        if self.dledger is not None:
            await self.dledger.stop()
            self.dledger = None
        if self.ctx is not None and not self._store_closed:
            self._store_closed = True
            await self.ctx.store.shutdown()

