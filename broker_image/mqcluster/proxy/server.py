"""The proxy's gRPC server: MessagingService for every broker group of the cluster."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError, Message
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from mqcluster.client.broker_api import BrokerApi
from mqcluster.proxy import routes
from mqcluster.proxy.config import ProxyConfig
from mqcluster.proxy.discovery import Discovery
from mqcluster.proxy.groups import GroupTable
from mqcluster.proxy.health import Prober
from mqcluster.proxy.metrics import ProxyHttp, ProxyMetrics
from mqcluster.proxy.service import ProxyService, metadata_of
from mqcluster.proxy.telemetry import TelemetryRelay
from mqcluster.proxy.upstream import SERVICE, Channels, Upstream

log = logging.getLogger(__name__)

Context = Any
Unary = Callable[[bytes, Context], Awaitable[Message]]


def _serialize(item: bytes | Message) -> bytes:
    return item if isinstance(item, bytes) else item.SerializeToString()


def _unary(fn: Unary, answer: type[Message]) -> grpc.RpcMethodHandler:
    name = answer.DESCRIPTOR.name

    async def handle(raw: bytes, context: Context) -> Message:
        try:
            return await fn(raw, context)
        except DecodeError as exc:
            return answer(status=routes.status(pb.Code.BAD_REQUEST, f"malformed request: {exc}"))
        except grpc.aio.AioRpcError as exc:  # the master answered with a gRPC error
            await context.abort(exc.code(), exc.details() or "")
            raise
        except Exception as exc:
            log.exception("%s failed", name)
            return answer(status=routes.status(pb.Code.INTERNAL_SERVER_ERROR,
                                               f"{type(exc).__name__}: {exc}"))

    return grpc.unary_unary_rpc_method_handler(handle, response_serializer=_serialize)


def build_handler(s: ProxyService, telemetry: Callable[[Context], TelemetryRelay]
                  ) -> grpc.GenericRpcHandler:
    async def relay(frames: AsyncIterator[bytes], context: Context) -> AsyncIterator[bytes]:
        async for item in telemetry(context).run(frames):
            yield item

    handlers = {
        "QueryRoute": _unary(s.query_route, spb.QueryRouteResponse),
        "QueryAssignment": _unary(s.query_assignment, spb.QueryAssignmentResponse),
        "Heartbeat": _unary(s.heartbeat, spb.HeartbeatResponse),
        "NotifyClientTermination": _unary(s.notify_client_termination,
                                          spb.NotifyClientTerminationResponse),
        "SendMessage": _unary(s.send_message, spb.SendMessageResponse),
        "EndTransaction": _unary(s.end_transaction, spb.EndTransactionResponse),
        "RecallMessage": _unary(s.recall_message, spb.RecallMessageResponse),
        "AckMessage": _unary(s.ack_message, spb.AckMessageResponse),
        "ChangeInvisibleDuration": _unary(
            s.by_receipt("ChangeInvisibleDuration", spb.ChangeInvisibleDurationRequest,
                         spb.ChangeInvisibleDurationResponse),
            spb.ChangeInvisibleDurationResponse),
        "ForwardMessageToDeadLetterQueue": _unary(
            s.by_receipt("ForwardMessageToDeadLetterQueue",
                         spb.ForwardMessageToDeadLetterQueueRequest,
                         spb.ForwardMessageToDeadLetterQueueResponse),
            spb.ForwardMessageToDeadLetterQueueResponse),
        "UpdateOffset": _unary(s.by_queue("UpdateOffset", spb.UpdateOffsetRequest,
                                          spb.UpdateOffsetResponse), spb.UpdateOffsetResponse),
        "GetOffset": _unary(s.by_queue("GetOffset", spb.GetOffsetRequest,
                                       spb.GetOffsetResponse), spb.GetOffsetResponse),
        "QueryOffset": _unary(s.by_queue("QueryOffset", spb.QueryOffsetRequest,
                                         spb.QueryOffsetResponse), spb.QueryOffsetResponse),
        "ReceiveMessage": grpc.unary_stream_rpc_method_handler(
            s.stream_by_queue("ReceiveMessage", spb.ReceiveMessageRequest,
                              spb.ReceiveMessageResponse), response_serializer=_serialize),
        "PullMessage": grpc.unary_stream_rpc_method_handler(
            s.stream_by_queue("PullMessage", spb.PullMessageRequest,
                              spb.PullMessageResponse), response_serializer=_serialize),
        "Telemetry": grpc.stream_stream_rpc_method_handler(relay),
    }
    return grpc.method_handlers_generic_handler(SERVICE, handlers)


@dataclass
class ProxyServer:
    server: grpc.aio.Server
    table: GroupTable
    discovery: Discovery
    prober: Prober
    channels: Channels
    brokers: BrokerApi
    host: str
    port: int
    metrics: ProxyMetrics
    http: ProxyHttp | None = None
    draining: bool = False

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def drain(self, seconds: float) -> None:
        """Stop taking new calls: /health turns 503 (readiness), then the server ends
        with GOAWAY, letting calls in flight finish within ``seconds``."""
        self.draining = True
        await self.server.stop(grace=seconds)

    async def stop(self) -> None:
        if self.http is not None:
            await self.http.stop()
        await self.server.stop(grace=1.0)
        await self.prober.stop()
        await self.discovery.stop()
        await self.channels.close()
        await self.brokers.close()


async def start_proxy(config: ProxyConfig) -> ProxyServer:
    brokers = BrokerApi(timeout=1.0)

    async def resolve_grpc(addr: str) -> str | None:
        return (await brokers.runtime_info(addr)).get("grpcServerAddr") or None

    table = GroupTable(config.probeFailures, time.monotonic)
    metrics = ProxyMetrics(table)
    table.listeners.append(metrics.master_changed)
    discovery = Discovery(config, table, resolve_grpc, metrics.lookup_failed)
    channels = Channels()
    upstream = Upstream(table, channels, config.callTimeoutMs / 1000,
                        config.masterWaitMs / 1000)
    service = ProxyService(table, upstream, metrics.call_failed_fast,
                           topic_groups=discovery.topic_groups)
    prober = Prober(table, channels, config.probeIntervalMs / 1000,
                    config.probeTimeoutMs / 1000)
    handler = build_handler(
        service, lambda ctx: TelemetryRelay(table, channels, upstream, metadata_of(ctx)))
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", -1),
                                      ("grpc.max_send_message_length", -1),
                                      ("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port(f"{config.bindAddress}:{config.grpcServerPort}")
    if port == 0:
        raise OSError(f"cannot bind {config.bindAddress}:{config.grpcServerPort}")
    proxy = ProxyServer(server, table, discovery, prober, channels, brokers,
                        config.bindAddress, port, metrics)
    if config.metricsPromExporterPort:
        proxy.http = ProxyHttp(metrics, config.metricsPromExporterHost or config.bindAddress,
                               config.metricsPromExporterPort, lambda: proxy.draining)
        await proxy.http.start()
    discovery.start()
    prober.start()
    # Serve once the groups are known (or after a short wait: a cluster still starting).
    try:
        await asyncio.wait_for(discovery.first_round.wait(), 5.0)
    except TimeoutError:
        log.warning("no broker group known yet: serving anyway")
    await server.start()
    log.info("proxy listening on %s:%d", config.bindAddress, port)
    return proxy
