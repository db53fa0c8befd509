"""The proxy's gRPC server: every MessagingService call goes to the group's master."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import grpc

from mqcluster.broker.grpc.forward import ForwardingHandler, MasterChannels
from mqcluster.broker.grpc.server import SERVICE_NAME
from mqcluster.client.broker_api import BrokerApi
from mqcluster.proxy.config import ProxyConfig
from mqcluster.proxy.master_source import (
    ControllerMasterSource,
    MasterSource,
    NamesrvMasterSource,
)
from mqcluster.proxy.metrics import ProxyHttp, ProxyMetrics
from mqcluster.proxy.tracker import MasterTracker

log = logging.getLogger(__name__)


class _NothingLocal(grpc.GenericRpcHandler):  # type: ignore[misc]
    """The proxy serves no method itself (UNIMPLEMENTED for other services)."""

    def service(self, details: grpc.HandlerCallDetails) -> None:
        return None


def master_source(config: ProxyConfig) -> MasterSource:
    if config.controllerAddr:
        return ControllerMasterSource(config.controllerAddr, config.brokerName)
    return NamesrvMasterSource(config.namesrvAddr, config.brokerName)


@dataclass
class ProxyServer:
    server: grpc.aio.Server
    tracker: MasterTracker
    channels: MasterChannels
    brokers: BrokerApi
    host: str
    port: int
    metrics: ProxyMetrics
    http: ProxyHttp | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def stop(self) -> None:
        if self.http is not None:
            await self.http.stop()
        await self.server.stop(grace=1.0)
        await self.tracker.stop()
        await self.channels.close()
        await self.brokers.close()


async def start_proxy(config: ProxyConfig, source: MasterSource | None = None) -> ProxyServer:
    brokers = BrokerApi(timeout=1.0)

    async def resolve_grpc(addr: str) -> str | None:
        return (await brokers.runtime_info(addr)).get("grpcServerAddr") or None

    tracker = MasterTracker(source or master_source(config), resolve_grpc,
                            config.masterPollIntervalMs / 1000)
    channels = MasterChannels()
    tracker.listeners.append(channels.role_changed)
    metrics = ProxyMetrics(config.brokerName, tracker.role)
    tracker.listeners.append(metrics.role_changed)
    tracker.on_lookup_failure = metrics.lookup_failed
    handler = ForwardingHandler(SERVICE_NAME, _NothingLocal(), tracker.role, channels,
                                patience=config.masterWaitMs / 1000)
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", -1),
                                      ("grpc.max_send_message_length", -1),
                                      ("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port(f"{config.bindAddress}:{config.grpcServerPort}")
    if port == 0:
        raise OSError(f"cannot bind {config.bindAddress}:{config.grpcServerPort}")
    http = None
    if config.metricsPromExporterPort:
        http = ProxyHttp(metrics, config.metricsPromExporterHost or config.bindAddress,
                         config.metricsPromExporterPort)
        await http.start()
    tracker.start()
    await server.start()
    log.info("proxy for broker group %s listening on %s:%d", config.brokerName,
             config.bindAddress, port)
    return ProxyServer(server, tracker, channels, brokers, config.bindAddress, port, metrics,
                       http)
