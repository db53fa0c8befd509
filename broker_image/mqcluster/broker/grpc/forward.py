"""Every replica's gRPC endpoint serves the whole group: a replica that is not the
master passes each client call on to the master's endpoint, as RocketMQ 5's Proxy in
cluster mode does.

The decision is made when a call arrives (a call that started on the master stays
there). Requests and responses cross as raw bytes, with the client's metadata and
deadline; the master's status and trailing metadata come back unchanged. Streams
(ReceiveMessage, Telemetry) are relayed both ways and end when the master changes, so
the client reconnects to the right place. With no master known, or the master
unreachable, the call ends at once with UNAVAILABLE: the official client retries a
send at once on any error (it only gives up on TooManyRequests or after its attempts).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from mqcluster.broker.context import ReplicaRole

log = logging.getLogger(__name__)

Context = Any
UNARY_STREAM = frozenset({"ReceiveMessage", "PullMessage"})
STREAM_STREAM = frozenset({"Telemetry"})
# Calls that change nothing on the broker: when the master moves while one is in flight,
# it is asked again of the new master instead of failing back to the client.
IDEMPOTENT = frozenset({"QueryRoute", "Heartbeat", "QueryAssignment", "GetOffset",
                        "QueryOffset"})
# Metadata the transport sets itself; passing it on would confuse the next hop.
_TRANSPORT_KEYS = frozenset({"user-agent", "grpc-accept-encoding", "grpc-timeout"})


def _metadata(context: Context) -> tuple[tuple[str, str | bytes], ...]:
    return tuple((k, v) for k, v in (context.invocation_metadata() or ())
                 if k not in _TRANSPORT_KEYS and not k.startswith(":"))


class MasterChannels:
    """One channel to the current master's endpoint, replaced when the master moves."""

    def __init__(self) -> None:
        self._target: str | None = None
        self._channel: grpc.aio.Channel | None = None
        self.generation = 0
        self.changed = asyncio.Event()

    def channel(self, target: str) -> grpc.aio.Channel:
        if self._channel is None or target != self._target:
            self._drop()
            self._target = target
            self._channel = grpc.aio.insecure_channel(target, options=[
                ("grpc.max_receive_message_length", -1),
                ("grpc.max_send_message_length", -1),
                # Connections of its own: channels to one address share them otherwise,
                # and a master that died and was elected again on the same address would
                # wait out the dead connection's reconnect backoff (about a second).
                ("grpc.use_local_subchannel_pool", 1),
            ])
        return self._channel

    def role_changed(self, old: ReplicaRole, new: ReplicaRole) -> None:
        if (old.is_master, old.master_grpc) != (new.is_master, new.master_grpc):
            self.generation += 1
            self.changed.set()
            self.changed = asyncio.Event()
            self._drop()

    def _drop(self) -> None:
        channel, self._channel, self._target = self._channel, None, None
        if channel is not None:
            asyncio.get_running_loop().create_task(channel.close(grace=1.0))

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None


class ForwardingHandler(grpc.GenericRpcHandler):  # type: ignore[misc]
    """Serves calls locally on the master, forwards them from any other replica."""

    def __init__(self, service_name: str, local: grpc.GenericRpcHandler,
                 role: Callable[[], ReplicaRole], channels: MasterChannels,
                 patience: float = 0.0) -> None:
        self._prefix = f"/{service_name}/"
        self._local = local
        self._role = role
        self._channels = channels
        self._patience = patience
        """Seconds a unary call waits for a master to be known or to come back before it
        fails UNAVAILABLE (0: fail at once and let the client retry)."""

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method: str = details.method
        role = self._role()
        if role.is_master or not method.startswith(self._prefix):
            return self._local.service(details)
        name = method[len(self._prefix):]
        target = role.master_grpc
        if name in STREAM_STREAM:
            return grpc.stream_stream_rpc_method_handler(self._bidi(method, target))
        if name in UNARY_STREAM:
            return grpc.unary_stream_rpc_method_handler(self._server_stream(method, target))
        return grpc.unary_unary_rpc_method_handler(
            self._unary(method, target, name in IDEMPOTENT))

    async def _no_master(self, context: Context, target: str | None,
                         exc: BaseException | None = None) -> None:
        detail = (f"this replica is not the master and cannot reach it at {target}: {exc}"
                  if target else "this replica is not the master and no master is known yet")
        await context.abort(grpc.StatusCode.UNAVAILABLE, detail)

    async def _next_master(self, context: Context, unusable: str | None) -> str | None:
        """Within the patience and the call's deadline, wait for a master other than
        ``unusable`` (None: any); None when none came."""
        loop = asyncio.get_running_loop()
        remaining = context.time_remaining()
        give_up = loop.time() + min(self._patience, remaining if remaining else self._patience)
        while True:
            target = self._role().master_grpc
            if target and target != unusable:
                return target
            left = give_up - loop.time()
            if left <= 0:
                return None
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await self._channels.changed.wait()

    def _unary(self, method: str, target: str | None,
               idempotent: bool = False) -> Callable[..., Any]:
        async def handle(request: bytes, context: Context) -> bytes:
            current = target
            if not current and self._patience:
                current = await self._next_master(context, None)
            if not current:
                await self._no_master(context, current)
            assert current is not None
            while True:
                channels = self._channels
                changed = channels.changed
                call = channels.channel(current).unary_unary(method)(
                    request, metadata=_metadata(context), timeout=context.time_remaining())
                moved = asyncio.ensure_future(changed.wait())
                answer = asyncio.ensure_future(_result(call))
                done, _ = await asyncio.wait({answer, moved},
                                             return_when=asyncio.FIRST_COMPLETED)
                if answer not in done:  # the master moved (it may hang)
                    call.cancel()
                    answer.cancel()
                    nxt = self._role().master_grpc
                    if idempotent and self._patience and nxt and nxt != current:
                        current = nxt
                        continue
                    await context.abort(grpc.StatusCode.UNAVAILABLE,
                                        f"the master moved away from {current}; retry")
                moved.cancel()
                try:
                    response: bytes = await answer
                except grpc.aio.AioRpcError as exc:
                    if exc.code() is grpc.StatusCode.UNAVAILABLE and self._patience:
                        # The master is gone (killed, restarting): wait for the next one.
                        nxt = await self._next_master(context, current)
                        if nxt is not None:
                            current = nxt
                            continue
                    await _relay_error(context, exc, current)
                    raise
                context.set_trailing_metadata(await call.trailing_metadata() or ())
                return response

        return handle

    def _server_stream(self, method: str, target: str | None) -> Callable[..., Any]:
        channels = self._channels

        async def handle(request: bytes, context: Context) -> AsyncIterator[bytes]:
            if not target:
                await self._no_master(context, target)
            assert target is not None
            call = channels.channel(target).unary_stream(method)(
                request, metadata=_metadata(context), timeout=context.time_remaining())
            try:
                async for item in _until_master_changes(call, channels):
                    yield item
            except grpc.aio.AioRpcError as exc:
                await _relay_error(context, exc, target)

        return handle

    def _bidi(self, method: str, target: str | None) -> Callable[..., Any]:
        channels = self._channels

        async def handle(requests: AsyncIterator[bytes],
                         context: Context) -> AsyncIterator[bytes]:
            if not target:
                await self._no_master(context, target)
            assert target is not None
            call = channels.channel(target).stream_stream(method)(
                metadata=_metadata(context), timeout=context.time_remaining())

            async def pump() -> None:
                with contextlib.suppress(Exception):
                    async for frame in requests:
                        await call.write(frame)
                    await call.done_writing()

            pumping = asyncio.ensure_future(pump())
            try:
                async for item in _until_master_changes(call, channels):
                    yield item
            except grpc.aio.AioRpcError as exc:
                await _relay_error(context, exc, target)
            finally:
                pumping.cancel()
                call.cancel()

        return handle


async def _result(call: Any) -> bytes:
    response: bytes = await call
    return response


async def _until_master_changes(call: Any, channels: MasterChannels) -> AsyncIterator[bytes]:
    """Relay ``call``'s responses; stop (cancelling it) when the master changes."""
    changed = channels.changed
    responses = call.__aiter__()
    try:
        while True:
            nxt = asyncio.ensure_future(responses.__anext__())
            moved = asyncio.ensure_future(changed.wait())
            done, _ = await asyncio.wait({nxt, moved}, return_when=asyncio.FIRST_COMPLETED)
            if nxt not in done:
                nxt.cancel()
                return
            moved.cancel()
            try:
                yield nxt.result()
            except StopAsyncIteration:
                return
    except grpc.aio.AioRpcError as exc:
        log.info("forwarded stream ended: %s", exc.code())
        raise
    finally:
        call.cancel()


async def _relay_error(context: Context, exc: grpc.aio.AioRpcError, target: str) -> None:
    code = exc.code()
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
        await context.abort(grpc.StatusCode.UNAVAILABLE,
                            f"master at {target} unreachable: {exc.details()}")
    await context.abort(code, exc.details() or "")
