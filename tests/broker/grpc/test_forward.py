"""A replica's gRPC endpoint forwards client calls to the master's (``broker.grpc.forward``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import grpc
import pytest

from mqcluster.broker.context import ReplicaRole
from mqcluster.broker.grpc.forward import ForwardingHandler, MasterChannels
from mqcluster_testing.broker.procs import free_ip

SERVICE = "apache.rocketmq.v2.MessagingService"
METHOD = f"/{SERVICE}/SendMessage"


class Echo(grpc.GenericRpcHandler):  # type: ignore[misc]
    """A master that answers every call with its name and the request."""

    def __init__(self, name: bytes) -> None:
        self.name = name

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        async def answer(request: bytes, context: object) -> bytes:
            return self.name + b":" + request

        return grpc.unary_unary_rpc_method_handler(answer)


async def serve(handler: grpc.GenericRpcHandler, address: str) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port(address)
    await server.start()
    return server, port


@pytest.fixture
async def replica() -> AsyncIterator[tuple[str, Callable[[ReplicaRole], None]]]:
    """A forwarding replica's endpoint, and how to change the role it sees."""
    channels = MasterChannels()
    role = [ReplicaRole(2, False)]

    def set_role(new: ReplicaRole) -> None:
        old, role[0] = role[0], new
        channels.role_changed(old, new)

    handler = ForwardingHandler(SERVICE, Echo(b"local"), lambda: role[0], channels)
    ip = free_ip()
    server, port = await serve(handler, f"{ip}:0")
    try:
        yield f"{ip}:{port}", set_role
    finally:
        await server.stop(None)
        await channels.close()


async def call(target: str, body: bytes) -> bytes:
    async with grpc.aio.insecure_channel(target) as channel:
        answer: bytes = await channel.unary_unary(METHOD)(body, timeout=5)
        return answer


async def test_a_master_back_on_its_address_is_reached_at_once(replica) -> None:  # type: ignore[no-untyped-def]
    """A master that died and came back on the same address (a restarted broker elected
    again) is reachable through the replica at once: the replica's new channel does not
    share the dead connection's reconnect backoff (about a second)."""
    endpoint, set_role = replica
    ip = free_ip()
    master, port = await serve(Echo(b"m"), f"{ip}:0")
    master_grpc = f"{ip}:{port}"
    set_role(ReplicaRole(2, False, "m:10911", master_grpc, 1))
    assert await call(endpoint, b"before") == b"m:before"
    await master.stop(None)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call(endpoint, b"while it is down")
    assert err.value.code() is grpc.StatusCode.UNAVAILABLE
    set_role(ReplicaRole(2, False, None, None, 2))  # another master came and went
    master, _ = await serve(Echo(b"m"), master_grpc)
    try:
        set_role(ReplicaRole(2, False, "m:10911", master_grpc, 3))
        assert await call(endpoint, b"after") == b"m:after"
    finally:
        await master.stop(None)


class Refuses(grpc.GenericRpcHandler):  # type: ignore[misc]
    """A master whose streaming calls end with INVALID_ARGUMENT, as for a bad request."""

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        async def refuse(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
                         ) -> AsyncIterator[bytes]:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad telemetry command")
            yield b""  # pragma: no cover (makes this an async generator)

        async def refuse_one(request: bytes, context: grpc.aio.ServicerContext
                             ) -> AsyncIterator[bytes]:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad receive request")
            yield b""  # pragma: no cover

        if details.method.endswith("Telemetry"):
            return grpc.stream_stream_rpc_method_handler(refuse)
        return grpc.unary_stream_rpc_method_handler(refuse_one)


async def test_a_streaming_call_the_master_refuses_keeps_its_status(replica) -> None:  # type: ignore[no-untyped-def]
    """A forwarded stream that the master ends with an error status reaches the client
    with that status and its details, not as UNKNOWN (an exception escaping the
    servicer, logged with a traceback)."""
    endpoint, set_role = replica
    ip = free_ip()
    master, port = await serve(Refuses(), f"{ip}:0")
    set_role(ReplicaRole(2, False, "m:10911", f"{ip}:{port}", 1))
    try:
        async with grpc.aio.insecure_channel(endpoint) as channel:
            for method, details in (("Telemetry", "bad telemetry command"),
                                    ("ReceiveMessage", "bad receive request")):
                path = f"/{SERVICE}/{method}"
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    if method == "Telemetry":
                        call = channel.stream_stream(path)(iter([b"x"]), timeout=5)
                    else:
                        call = channel.unary_stream(path)(b"x", timeout=5)
                    async for _ in call:
                        pass
                assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT, method
                assert err.value.details() == details
    finally:
        await master.stop(None)
