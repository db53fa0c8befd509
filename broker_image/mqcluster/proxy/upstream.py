"""Calls from the proxy to a group's master: one channel per master endpoint, a short
deadline on every call, and what each outcome says about the master's health.

A hung master (SIGSTOP, a frozen VM, a partition) keeps its TCP connection open and
never answers: a call that does not come back within ``call_timeout`` fails with
``Unreachable`` and counts against the group (``GroupTable.failed``); the health probe
counts the same way, so after a few failures the group's calls fail at once instead
of each waiting out its deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc
from rocketmq.grpc_protocol import definition_pb2 as pb

from mqcluster.proxy.groups import GroupTable

log = logging.getLogger(__name__)

SERVICE = "apache.rocketmq.v2.MessagingService"
Metadata = Sequence[tuple[str, str | bytes]]
# Where a gRPC failure means "this master cannot be reached" rather than "it refused".
_UNREACHABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                          grpc.StatusCode.CANCELLED})


class Unreachable(Exception):
    """The group's master did not answer: ``code`` is the RocketMQ status to give."""

    def __init__(self, group: str, code: int, message: str) -> None:
        super().__init__(f"broker group {group}: {message}")
        self.group = group
        self.code = code


class Channels:
    """One channel per master endpoint; dropped when no group's master is there."""

    def __init__(self) -> None:
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._calls: dict[tuple[str, str], Any] = {}

    def get(self, target: str) -> grpc.aio.Channel:
        channel = self._channels.get(target)
        if channel is None:
            channel = self._channels[target] = grpc.aio.insecure_channel(target, options=[
                ("grpc.max_receive_message_length", -1),
                ("grpc.max_send_message_length", -1),
                # Connections of its own: a master that died and came back on the same
                # address would otherwise wait out the dead connection's reconnect backoff.
                ("grpc.use_local_subchannel_pool", 1),
                ("grpc.initial_reconnect_backoff_ms", 100),
                ("grpc.max_reconnect_backoff_ms", 1000),
            ])
        return channel

    def unary(self, target: str, method: str) -> Any:
        """The channel's callable for ``method`` (made once per channel)."""
        key = (target, method)
        call = self._calls.get(key)
        if call is None:
            call = self._calls[key] = self.get(target).unary_unary(f"/{SERVICE}/{method}")
        return call

    def keep_only(self, targets: set[str]) -> None:
        for target in [t for t in self._channels if t not in targets]:
            self._calls = {k: c for k, c in self._calls.items() if k[0] != target}
            channel = self._channels.pop(target)
            asyncio.get_running_loop().create_task(channel.close(grace=1.0))

    async def close(self) -> None:
        channels, self._channels = self._channels, {}
        self._calls = {}
        for channel in channels.values():
            await channel.close()


class Upstream:
    def __init__(self, table: GroupTable, channels: Channels, call_timeout: float,
                 master_wait: float) -> None:
        self.table = table
        self.channels = channels
        self.call_timeout = call_timeout
        self.master_wait = master_wait

    async def master(self, group: str, time_left: float | None) -> str:
        """The group's usable master endpoint, waiting (at most ``master_wait`` and the
        caller's time) for one; Unreachable when none came."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + min(self.master_wait, _or_inf(time_left))
        while True:
            target = self.table.usable(group)
            if target:
                return target
            left = give_up - loop.time()
            if left <= 0 or not await self.table.wait_change(left):
                state = self.table.state(group)
                if state is None:
                    raise Unreachable(group, pb.Code.HA_NOT_AVAILABLE,
                                      "no such broker group known to this proxy")
                why = (f"master {state.grpc} unreachable ({state.down_reason})" if state.grpc
                       else "no master elected yet")
                raise Unreachable(group, pb.Code.HA_NOT_AVAILABLE, why)

    async def unary(self, group: str, method: str, request: bytes, metadata: Metadata,
                    time_left: float | None, *, wait: bool = True) -> bytes:
        """One call to ``group``'s master; Unreachable if it cannot be reached in time.
        Other gRPC errors (the master answered with one) propagate as AioRpcError."""
        target = (await self.master(group, time_left) if wait
                  else self.table.usable(group))
        if not target:
            raise Unreachable(group, pb.Code.HA_NOT_AVAILABLE, "master unreachable")
        timeout = min(self.call_timeout, _or_inf(time_left))
        call = self.channels.unary(target, method)
        try:
            response: bytes = await call(request, metadata=metadata, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            if exc.code() not in _UNREACHABLE:
                raise
            why = f"{exc.code().name} after {timeout:.2f} s"
            self.table.failed(group, target, why)
            code = (pb.Code.PROXY_TIMEOUT if exc.code() is grpc.StatusCode.DEADLINE_EXCEEDED
                    else pb.Code.HA_NOT_AVAILABLE)
            raise Unreachable(group, code, f"master {target}: {why}") from exc
        self.table.answered(group, target)
        return response

    async def stream(self, group: str, method: str, request: bytes, metadata: Metadata,
                     time_left: float | None) -> AsyncIterator[bytes]:
        """A server stream from ``group``'s master, ended when the master changes or
        becomes unreachable (the client asks again and reaches the new one)."""
        target = await self.master(group, time_left)
        call = self.channels.get(target).unary_stream(f"/{SERVICE}/{method}")(
            request, metadata=metadata, timeout=time_left)
        async for item in self.relay(group, target, call):
            yield item

    async def relay(self, group: str, target: str, call: Any) -> AsyncIterator[bytes]:
        """``call``'s responses until it ends or ``target`` stops being the usable master."""
        responses = call.__aiter__()
        gone = asyncio.ensure_future(self._until_unusable(group, target))
        try:
            while True:
                nxt = asyncio.ensure_future(responses.__anext__())
                done, _ = await asyncio.wait({nxt, gone}, return_when=asyncio.FIRST_COMPLETED)
                if nxt not in done:
                    nxt.cancel()
                    with contextlib.suppress(BaseException):
                        await nxt
                    raise Unreachable(group, pb.Code.HA_NOT_AVAILABLE,
                                      f"master {target} moved away or stopped answering")
                try:
                    item = nxt.result()
                except StopAsyncIteration:
                    return
                yield item
        except grpc.aio.AioRpcError as exc:
            if exc.code() in _UNREACHABLE:
                self.table.failed(group, target, exc.code().name)
                raise Unreachable(group, pb.Code.HA_NOT_AVAILABLE,
                                  f"master {target}: {exc.code().name}") from exc
            raise
        finally:
            gone.cancel()
            call.cancel()

    async def _until_unusable(self, group: str, target: str) -> None:
        while self.table.usable(group) == target:
            await self.table.wait_change(3600)


def _or_inf(value: float | None) -> float:
    return math.inf if value is None else max(value, 0.0)
