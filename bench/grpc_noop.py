"""A do-nothing ``apache.rocketmq.v2.MessagingService``: the official client's ceiling.

It answers just enough for the official producer (route, settings, heartbeat) and
acknowledges every SendMessage without storing anything, on the same grpc.aio
server stack the broker uses. Rates against it measure the client library, grpc
and loopback alone, so the broker's endpoint can be reported as a ratio to it.

Run: ``python -m bench.grpc_noop HOST PORT``; prints ``ready`` once serving.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import AsyncIterator
from typing import Any

import grpc
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

SERVICE = "apache.rocketmq.v2.MessagingService"
QUEUES = 8
MAX_BODY = 4 * 1024 * 1024
OK = pb.Status(code=pb.Code.OK, message="OK")


class NoopService:
    def __init__(self, host: str, port: int) -> None:
        self.endpoints = pb.Endpoints(scheme=pb.AddressScheme.IPv4)
        self.endpoints.addresses.add(host=host, port=port)
        self._offsets = itertools.count()

    async def query_route(self, req: spb.QueryRouteRequest, _ctx: Any) -> spb.QueryRouteResponse:
        resp = spb.QueryRouteResponse(status=OK)
        for qid in range(QUEUES):
            mq = resp.message_queues.add(id=qid, permission=pb.Permission.READ_WRITE)
            mq.topic.CopyFrom(req.topic)
            mq.broker.name = "noop"
            mq.broker.endpoints.CopyFrom(self.endpoints)
            mq.accept_message_types.append(pb.MessageType.NORMAL)
        return resp

    async def heartbeat(self, _req: spb.HeartbeatRequest, _ctx: Any) -> spb.HeartbeatResponse:
        return spb.HeartbeatResponse(status=OK)

    async def send_message(self, req: spb.SendMessageRequest, _ctx: Any) -> spb.SendMessageResponse:
        entries = [
            spb.SendResultEntry(
                status=OK, message_id=m.system_properties.message_id, offset=next(self._offsets)
            )
            for m in req.messages
        ]
        return spb.SendMessageResponse(status=OK, entries=entries)

    async def notify_client_termination(
        self, _req: spb.NotifyClientTerminationRequest, _ctx: Any
    ) -> spb.NotifyClientTerminationResponse:
        return spb.NotifyClientTerminationResponse(status=OK)

    async def telemetry(
        self, frames: AsyncIterator[spb.TelemetryCommand], _ctx: Any
    ) -> AsyncIterator[spb.TelemetryCommand]:
        async for cmd in frames:
            if cmd.HasField("settings"):
                settings = pb.Settings()
                settings.CopyFrom(cmd.settings)
                settings.publishing.max_body_size = MAX_BODY
                policy = settings.backoff_policy
                policy.Clear()
                policy.max_attempts = 3
                policy.exponential_backoff.initial.FromMilliseconds(10)
                policy.exponential_backoff.max.FromMilliseconds(1000)
                policy.exponential_backoff.multiplier = 2.0
                yield spb.TelemetryCommand(status=OK, settings=settings)


def _unary(fn: Any, req: Any, resp: Any) -> grpc.RpcMethodHandler:
    return grpc.unary_unary_rpc_method_handler(
        fn, request_deserializer=req.FromString, response_serializer=resp.SerializeToString
    )


async def serve(host: str, port: int) -> None:
    svc = NoopService(host, port)
    handlers = {
        "QueryRoute": _unary(svc.query_route, spb.QueryRouteRequest, spb.QueryRouteResponse),
        "Heartbeat": _unary(svc.heartbeat, spb.HeartbeatRequest, spb.HeartbeatResponse),
        "SendMessage": _unary(svc.send_message, spb.SendMessageRequest, spb.SendMessageResponse),
        "NotifyClientTermination": _unary(
            svc.notify_client_termination,
            spb.NotifyClientTerminationRequest,
            spb.NotifyClientTerminationResponse,
        ),
        "Telemetry": grpc.stream_stream_rpc_method_handler(
            svc.telemetry,
            request_deserializer=spb.TelemetryCommand.FromString,
            response_serializer=spb.TelemetryCommand.SerializeToString,
        ),
    }
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    if server.add_insecure_port(f"{host}:{port}") == 0:
        raise OSError(f"cannot bind {host}:{port}")
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], int(sys.argv[2])))
