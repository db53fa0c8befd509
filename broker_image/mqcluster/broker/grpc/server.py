"""The grpc.aio server: request parsing, error-to-status mapping, start and stop.

Requests are parsed here rather than by grpc, so a truncated or corrupted payload
gets a response with Status BAD_REQUEST (and the server keeps serving) instead of a
bare transport error; a MessagingError becomes the response status; anything else
is logged and answered with INTERNAL_SERVER_ERROR.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar, cast

import grpc
from google.protobuf.message import DecodeError, Message
from rocketmq.grpc_protocol import service_pb2 as spb

from mqcluster.auth.guard import Denied, Guard
from mqcluster.auth.model import User
from mqcluster.broker.acl_gate import check_grpc, guard_of, host_of
from mqcluster.broker.context import ReplicaRole
from mqcluster.broker.grpc import convert
from mqcluster.broker.grpc.forward import ForwardingHandler, MasterChannels
from mqcluster.broker.grpc.host import MessagingHost
from mqcluster.broker.grpc.observe import TrafficObserver
from mqcluster.broker.grpc.routes import LocalRouteProvider, RouteProvider, parse_address
from mqcluster.broker.grpc.send_status import refusal_error
from mqcluster.broker.grpc.servicer import CallInfo, MessagingServicer
from mqcluster.broker.grpc.telemetry import TelemetrySession
from mqcluster.broker.grpc.write_perm import NamesrvWritePerm
from mqcluster.broker.messaging.clock import Clock
from mqcluster.broker.messaging.config import MessagingConfig
from mqcluster.broker.messaging.errors import Code, MessagingError
from mqcluster.broker.messaging.refusal import Refusal
from mqcluster.broker.messaging.service import MessagingService
from mqcluster.client.namesrv import NamesrvClient
from mqcluster.store.topic_config import PERM_READ, PERM_WRITE

log = logging.getLogger(__name__)

SERVICE_NAME = "apache.rocketmq.v2.MessagingService"
CLIENT_ID_HEADER = "x-mq-client-id"
NAMESPACE_HEADER = "x-mq-namespace"

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)
Context: TypeAlias = Any


def call_info(context: Context, user: User | None = None,
              guard: Guard | None = None) -> CallInfo:
    md = {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
    if guard is None:
        return CallInfo(md.get(CLIENT_ID_HEADER, ""), md.get(NAMESPACE_HEADER, ""),
                        context.time_remaining())
    return CallInfo(md.get(CLIENT_ID_HEADER, ""), md.get(NAMESPACE_HEADER, ""),
                    context.time_remaining(), user, guard, host_of(context.peer() or ""))


def _check(guard: Guard | None, method: str, req: Message | None,
           context: Context) -> User | None:
    """Authenticate and authorize one call (ACL 2.0) before anything is done for it:
    an unknown caller gets UNAUTHORIZED, a known one without the right FORBIDDEN."""
    if guard is None:
        return None
    md = {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
    try:
        return check_grpc(guard, method, req, md, context.peer() or "")
    except Denied as exc:
        code = Code.FORBIDDEN if exc.authenticated else Code.UNAUTHORIZED
        raise MessagingError(code, str(exc)) from None


def _rpc_name(req_type: type[Message]) -> str:
    return str(req_type.DESCRIPTOR.name).removesuffix("Request")


def _parse(req_type: type[Req], raw: bytes) -> Req:
    try:
        return cast(Req, req_type.FromString(raw))
    except DecodeError as exc:
        raise MessagingError(
            Code.BAD_REQUEST, f"malformed {req_type.DESCRIPTOR.name}: {exc}") from exc


def _failure(exc: BaseException, method: str) -> MessagingError:
    if isinstance(exc, MessagingError):
        return exc
    if isinstance(exc, Refusal):
        return refusal_error(exc)
    log.exception("%s failed", method)
    return MessagingError(Code.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")


def unary(req_type: type[Req], resp_type: type[Resp],
          fn: Callable[[Req, CallInfo], Awaitable[Resp]],
          guard: Guard | None = None) -> grpc.RpcMethodHandler:
    method = req_type.DESCRIPTOR.name
    rpc = _rpc_name(req_type)

    async def handle(raw: bytes, context: Context) -> Resp:
        try:
            req = _parse(req_type, raw)
            user = _check(guard, rpc, req, context)
            return await fn(req, call_info(context, user, guard))
        except Exception as exc:
            return cast(Resp, resp_type(status=convert.error_status(_failure(exc, method))))

    return grpc.unary_unary_rpc_method_handler(
        handle, response_serializer=resp_type.SerializeToString)


def server_stream(req_type: type[Req], resp_type: type[Resp],
                  fn: Callable[[Req, CallInfo], AsyncIterator[Resp]],
                  guard: Guard | None = None) -> grpc.RpcMethodHandler:
    method = req_type.DESCRIPTOR.name
    rpc = _rpc_name(req_type)

    async def handle(raw: bytes, context: Context) -> AsyncIterator[Resp]:
        try:
            req = _parse(req_type, raw)
            user = _check(guard, rpc, req, context)
            async for item in fn(req, call_info(context, user, guard)):
                yield item
        except Exception as exc:
            yield resp_type(status=convert.error_status(_failure(exc, method)))

    return grpc.unary_stream_rpc_method_handler(
        handle, response_serializer=resp_type.SerializeToString)


_unary_handler = unary
_stream_handler = server_stream


def build_handler(servicer: MessagingServicer,
                  guard: Guard | None = None) -> grpc.GenericRpcHandler:
    """Every method; with a ``guard``, each call is authenticated and authorized first."""
    s = servicer

    def unary(req_type: type[Req], resp_type: type[Resp],
              fn: Callable[[Req, CallInfo], Awaitable[Resp]]) -> grpc.RpcMethodHandler:
        return _unary_handler(req_type, resp_type, fn, guard)

    def server_stream(req_type: type[Req], resp_type: type[Resp],
                      fn: Callable[[Req, CallInfo], AsyncIterator[Resp]]
                      ) -> grpc.RpcMethodHandler:
        return _stream_handler(req_type, resp_type, fn, guard)

    async def telemetry(frames: AsyncIterator[bytes], context: Context) -> AsyncIterator[Any]:
        try:
            _check(guard, "Telemetry", None, context)
        except MessagingError as exc:
            yield spb.TelemetryCommand(status=convert.error_status(exc))
            return
        async for cmd in TelemetrySession(s.service, call_info(context).client_id).run(frames):
            yield cmd

    handlers = {
        "QueryRoute": unary(spb.QueryRouteRequest, spb.QueryRouteResponse, s.query_route),
        "Heartbeat": unary(spb.HeartbeatRequest, spb.HeartbeatResponse, s.heartbeat),
        "SendMessage": unary(spb.SendMessageRequest, spb.SendMessageResponse, s.send_message),
        "QueryAssignment": unary(spb.QueryAssignmentRequest, spb.QueryAssignmentResponse,
                                 s.query_assignment),
        "ReceiveMessage": server_stream(spb.ReceiveMessageRequest, spb.ReceiveMessageResponse,
                                        s.receive_message),
        "AckMessage": unary(spb.AckMessageRequest, spb.AckMessageResponse, s.ack_message),
        "ForwardMessageToDeadLetterQueue": unary(
            spb.ForwardMessageToDeadLetterQueueRequest,
            spb.ForwardMessageToDeadLetterQueueResponse,
            s.forward_message_to_dead_letter_queue),
        "PullMessage": server_stream(spb.PullMessageRequest, spb.PullMessageResponse,
                                     s.pull_message),
        "UpdateOffset": unary(spb.UpdateOffsetRequest, spb.UpdateOffsetResponse, s.update_offset),
        "GetOffset": unary(spb.GetOffsetRequest, spb.GetOffsetResponse, s.get_offset),
        "QueryOffset": unary(spb.QueryOffsetRequest, spb.QueryOffsetResponse, s.query_offset),
        "EndTransaction": unary(spb.EndTransactionRequest, spb.EndTransactionResponse,
                                s.end_transaction),
        "Telemetry": grpc.stream_stream_rpc_method_handler(
            telemetry, response_serializer=spb.TelemetryCommand.SerializeToString),
        "NotifyClientTermination": unary(spb.NotifyClientTerminationRequest,
                                         spb.NotifyClientTerminationResponse,
                                         s.notify_client_termination),
        "ChangeInvisibleDuration": unary(spb.ChangeInvisibleDurationRequest,
                                         spb.ChangeInvisibleDurationResponse,
                                         s.change_invisible_duration),
        "RecallMessage": unary(spb.RecallMessageRequest, spb.RecallMessageResponse,
                               s.recall_message),
        "SyncLiteSubscription": unary(spb.SyncLiteSubscriptionRequest,
                                      spb.SyncLiteSubscriptionResponse,
                                      s.sync_lite_subscription),
    }
    return grpc.method_handlers_generic_handler(SERVICE_NAME, handlers)


@dataclass
class GrpcEndpoint:
    """A running endpoint; ``port`` is the bound port (useful when 0 was asked for)."""

    server: grpc.aio.Server
    service: MessagingService
    servicer: MessagingServicer
    host: str
    port: int
    channels: MasterChannels | None = None
    namesrv: NamesrvClient | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def stop(self, grace_s: float = 1.0) -> None:
        await self.server.stop(grace_s)
        if self.channels is not None:
            await self.channels.close()
        if self.namesrv is not None:
            await self.namesrv.close()
        await self.service.stop()


def inbound_limit(config: MessagingConfig) -> int:
    """Big enough that an oversized message reaches the handler and gets a clear status."""
    return 4 * config.maxMessageSize + 1024 * 1024


def replicated(ctx: MessagingHost) -> bool:
    """A group whose replicas all serve its clients (controller or DLedger mode)."""
    cfg = ctx.config
    return bool(getattr(cfg, "enableControllerMode", False)
                or getattr(cfg, "enableDLegerCommitLog", False))


def route_address(ctx: MessagingHost, config: MessagingConfig) -> str | None:
    """The endpoint routes advertise; None means the address each client connected to.

    A replicated group always names the client's access point (every replica's
    endpoint, or the Service in front of them), so routes outlive failovers."""
    if config.grpcRouteAccessPoint or replicated(ctx):
        return None
    return ctx.addresses.grpc


def _namesrv_client(ctx: MessagingHost) -> NamesrvClient | None:
    """A client of the broker's name servers (``namesrvAddr``), if it has any."""
    addrs = getattr(ctx.config, "namesrv_addrs", None)
    if not addrs or not isinstance(addrs, (list, tuple)):
        return None
    return NamesrvClient(addrs, timeout=1.0)


def broker_permission(ctx: MessagingHost) -> int:
    """The broker's ``brokerPermission`` now (``updateBrokerConfig`` replaces the config);
    a host without one (a test harness) may read and write."""
    perm = getattr(ctx.config, "brokerPermission", None)
    return perm if isinstance(perm, int) else PERM_READ | PERM_WRITE


def is_master(ctx: MessagingHost) -> bool:
    """Whether this broker takes writes now; a host without a role (a test harness) does."""
    role = getattr(ctx, "role", None)
    return role.is_master if isinstance(role, ReplicaRole) else True


def takes_over(old: ReplicaRole, new: ReplicaRole) -> bool:
    """Whether a role change makes this broker a master that another may have
    preceded: it was not master, or it is master in a new epoch."""
    return new.is_master and (not old.is_master or new.master_epoch != old.master_epoch)


async def start_grpc_server(ctx: MessagingHost, host: str, port: int, *,
                            route_provider: RouteProvider | None = None,
                            clock: Clock | None = None,
                            config: MessagingConfig | None = None) -> GrpcEndpoint:
    """Serve ``MessagingService`` for ``ctx.store`` on ``host:port`` (0 = any free port)."""
    cfg = config or MessagingConfig.from_broker(
        ctx.config, brokerName=ctx.broker_name, brokerClusterName=ctx.cluster_name,
        brokerId=ctx.broker_id)
    service = MessagingService(ctx.store, cfg, clock=clock, on_topic_created=ctx.topics_changed,
                               broker_permission=lambda: broker_permission(ctx),
                               is_master=lambda: is_master(ctx), metrics=ctx.metrics)
    await service.start()
    try:
        limit = inbound_limit(cfg)
        server = grpc.aio.server(options=[
            ("grpc.max_receive_message_length", limit),
            ("grpc.max_send_message_length", limit),
            ("grpc.so_reuseport", 0),
        ])
        advertised = route_address(ctx, cfg)
        namesrv = _namesrv_client(ctx) if route_provider is None else None
        wiped = NamesrvWritePerm(namesrv, cfg.brokerName).wiped if namesrv else None
        routes = route_provider or LocalRouteProvider(
            service.catalog, cfg.brokerName, 0 if replicated(ctx) else cfg.brokerId,
            parse_address(advertised) if advertised else None, write_wiped=wiped)
        servicer = MessagingServicer(service, routes, TrafficObserver(ctx.metrics))
        handler = build_handler(servicer, guard_of(ctx.config))
        channels: MasterChannels | None = None
        role = getattr(ctx, "role", None)
        if isinstance(role, ReplicaRole) and replicated(ctx):
            channels = MasterChannels()
            ctx.role_listeners.append(channels.role_changed)  # type: ignore[attr-defined]
            ctx.role_listeners.append(  # type: ignore[attr-defined]
                lambda old, new: service.took_over() if takes_over(old, new) else None)
            handler = ForwardingHandler(SERVICE_NAME, handler,
                                        lambda: ctx.role, channels)  # type: ignore[attr-defined]
        server.add_generic_rpc_handlers((handler,))
        bound = server.add_insecure_port(f"{host}:{port}")
        if bound == 0:
            raise OSError(f"cannot bind the gRPC endpoint to {host}:{port}")
        await server.start()
    except BaseException:
        await service.stop()
        if namesrv is not None:
            await namesrv.close()
        raise
    log.info("gRPC MessagingService listening on %s:%d", host, bound)
    return GrpcEndpoint(server, service, servicer, host, bound, channels, namesrv)
