"""The proxy's own look at every group's master: a Heartbeat with a short deadline.

A hung master is found by this probe even while no client call is going to it, so
calls for that group fail fast (and sends go to other groups) until the controllers
elect another master, which discovery reports."""

from __future__ import annotations

import asyncio
import contextlib

import grpc
from rocketmq.grpc_protocol import service_pb2 as spb

from mqcluster.proxy.groups import GroupTable
from mqcluster.proxy.upstream import SERVICE, Channels

_PROBE = spb.HeartbeatRequest().SerializeToString()


class Prober:
    def __init__(self, table: GroupTable, channels: Channels, interval: float,
                 timeout: float) -> None:
        self.table = table
        self.channels = channels
        self.interval = interval
        self.timeout = timeout
        self._running: dict[str, asyncio.Task[None]] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="proxy-probe")

    async def stop(self) -> None:
        tasks = [t for t in [self._task, *self._running.values()] if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        while True:
            self.round()
            await asyncio.sleep(self.interval)

    def round(self) -> None:
        """Probe each group's master unless its last probe is still out."""
        for name, state in list(self.table.groups.items()):
            running = self._running.get(name)
            if state.grpc and (running is None or running.done()):
                self._running[name] = asyncio.ensure_future(self.probe(name, state.grpc))
        self.channels.keep_only({s.grpc for s in self.table.groups.values() if s.grpc})

    async def probe(self, name: str, target: str) -> None:
        call = self.channels.get(target).unary_unary(f"/{SERVICE}/Heartbeat")
        try:
            await call(_PROBE, timeout=self.timeout)
        except grpc.aio.AioRpcError as exc:
            if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                self.table.failed(name, target, f"probe: {exc.code().name}")
                return
        self.table.answered(name, target)
