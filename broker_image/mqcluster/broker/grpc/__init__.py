"""The client endpoint: ``apache.rocketmq.v2.MessagingService`` over gRPC, as RocketMQ 5's
Proxy serves it in Local mode (inside the broker process).

Entry point for the broker process::

    endpoint = await start_grpc_server(ctx, host, port)   # ctx: a MessagingHost
    ...                                                   # (BrokerContext fits)
    await endpoint.stop()

``route_provider=`` plugs in another ``RouteProvider`` (e.g. name-server backed);
``clock=`` and ``config=`` are for tests.
"""

# First: the official client's stubs without its package __init__ (see grpc_stubs.py).
import mqcluster.protocol.grpc_stubs  # noqa: F401  # isort: skip
from mqcluster.broker.grpc.host import MessagingHost
from mqcluster.broker.grpc.routes import LocalRouteProvider, QueueRoute, RouteProvider
from mqcluster.broker.grpc.server import GrpcEndpoint, start_grpc_server

__all__ = [
    "GrpcEndpoint",
    "LocalRouteProvider",
    "MessagingHost",
    "QueueRoute",
    "RouteProvider",
    "start_grpc_server",
]
