"""A client's Telemetry stream, relayed to every group's master.

The client writes its Settings (and later its answers to the server's commands); each
group's master answers Settings and sends transaction check-backs for the topics the
client publishes. The proxy keeps one upstream stream per group with a usable master,
sends each the client's last Settings when it (re)opens, passes the client's frames to
all of them, and gives the client one answer per Settings (the first group's) and
every group's commands, a check-back's transaction id wrapped with its group so the
client's EndTransaction finds it (tokens.py). An upstream whose master moves or stops
answering is reopened on the next master.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from rocketmq.grpc_protocol import service_pb2 as spb

from mqcluster.proxy import tokens
from mqcluster.proxy.groups import GroupTable
from mqcluster.proxy.upstream import SERVICE, Channels, Metadata, Unreachable, Upstream

log = logging.getLogger(__name__)

_END = b""


class TelemetryRelay:
    def __init__(self, table: GroupTable, channels: Channels, upstream: Upstream,
                 metadata: Metadata) -> None:
        self.table = table
        self.channels = channels
        self.upstream = upstream
        self.metadata = metadata
        self.out: asyncio.Queue[bytes] = asyncio.Queue()
        self.settings: bytes | None = None
        self.asked = 0  # Settings frames written by the client
        self.answered = 0  # Settings answers given to it
        self.writers: dict[str, asyncio.Queue[bytes]] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}

    async def run(self, frames: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        reader = asyncio.ensure_future(self._read(frames))
        keeper = asyncio.ensure_future(self._keep_upstreams())
        try:
            while (item := await self.out.get()) != _END:
                yield item
        finally:
            reader.cancel()
            keeper.cancel()
            for task in self.tasks.values():
                task.cancel()

    async def _read(self, frames: AsyncIterator[bytes]) -> None:
        try:
            async for raw in frames:
                try:
                    cmd = spb.TelemetryCommand.FromString(raw)
                except DecodeError:
                    continue
                if cmd.WhichOneof("command") == "settings":
                    self.settings = raw
                    self.asked += 1
                for queue in self.writers.values():
                    queue.put_nowait(raw)
                self._ensure_upstreams()
        except Exception as exc:
            log.debug("telemetry stream from the client ended: %r", exc)
        finally:
            self.out.put_nowait(_END)

    async def _keep_upstreams(self) -> None:
        while True:
            self._ensure_upstreams()
            await self.table.wait_change(5.0)

    def _ensure_upstreams(self) -> None:
        if self.settings is None:
            return  # nothing to tell a master before the client's Settings
        for group in self.table.usable_groups():
            task = self.tasks.get(group)
            if task is None or task.done():
                self.writers[group] = asyncio.Queue()
                self.tasks[group] = asyncio.ensure_future(self._upstream(group))

    async def _upstream(self, group: str) -> None:
        target = self.table.usable(group)
        if not target:
            return
        queue = self.writers[group]
        call = self.channels.get(target).stream_stream(f"/{SERVICE}/Telemetry")(
            metadata=self.metadata)

        async def pump() -> None:
            with contextlib.suppress(Exception):
                if self.settings is not None:
                    await call.write(self.settings)
                while True:
                    await call.write(await queue.get())

        pumping = asyncio.ensure_future(pump())
        try:
            async for raw in self.upstream.relay(group, target, call):
                self._from_master(group, raw)
        except (Unreachable, grpc.aio.AioRpcError) as exc:
            log.debug("telemetry upstream to %s ended: %s", group, exc)
        finally:
            pumping.cancel()
            self.writers.pop(group, None)

    def _from_master(self, group: str, raw: bytes) -> None:
        cmd = spb.TelemetryCommand.FromString(raw)
        which = cmd.WhichOneof("command")
        if which == "settings" or (which is None and cmd.HasField("status")):
            if self.answered < self.asked:  # one answer per Settings, the first group's
                self.answered += 1
                self.out.put_nowait(raw)
            return
        if which == "recover_orphaned_transaction_command":
            rec = cmd.recover_orphaned_transaction_command
            rec.transaction_id = tokens.wrap(group, rec.transaction_id)
            self.out.put_nowait(cmd.SerializeToString())
            return
        self.out.put_nowait(raw)


async def relay_telemetry(relay: TelemetryRelay,
                          frames: AsyncIterator[bytes]) -> AsyncIterator[Any]:
    async for item in relay.run(frames):
        yield item
