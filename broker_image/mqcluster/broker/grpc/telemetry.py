"""The Telemetry stream: settings handshake in, server commands (check-backs) out.

A client writes its Settings first and (a push consumer) waits for the server's
Settings before it starts; every Settings is answered with the server's view.
While the stream is open, transaction check-backs for topics the client publishes
are sent on it as RecoverOrphanedTransactionCommand.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from google.protobuf.message import DecodeError
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from mqcluster.broker.grpc import convert
from mqcluster.broker.grpc.send_status import refusal_error
from mqcluster.broker.grpc.settings import server_settings
from mqcluster.broker.messaging.clients import ClientKind
from mqcluster.broker.messaging.errors import Code, MessagingError
from mqcluster.broker.messaging.refusal import Refusal
from mqcluster.broker.messaging.service import MessagingService
from mqcluster.broker.messaging.transaction import CheckRequest

log = logging.getLogger(__name__)

_END = None


def check_command(check: CheckRequest) -> spb.TelemetryCommand:
    cmd = spb.TelemetryCommand()
    rec = cmd.recover_orphaned_transaction_command
    rec.transaction_id = check.transaction_id
    rec.message.CopyFrom(convert.stored_message(check.message, check.topic))
    return cmd


class TelemetrySession:
    def __init__(self, service: MessagingService, client_id: str) -> None:
        self._service = service
        self._client_id = client_id
        self._out: asyncio.Queue[spb.TelemetryCommand | None] = asyncio.Queue()

    def _sink(self, check: CheckRequest) -> None:
        self._out.put_nowait(check_command(check))

    def answer(self, raw: bytes) -> spb.TelemetryCommand | None:
        """The reply to one client frame (None when the frame needs no reply)."""
        try:
            cmd = spb.TelemetryCommand.FromString(raw)
        except DecodeError as exc:
            return spb.TelemetryCommand(status=convert.status(
                Code.BAD_REQUEST, f"malformed TelemetryCommand: {exc}"))
        which = cmd.WhichOneof("command")
        if which != "settings":
            log.debug("telemetry from %s: %s ignored", self._client_id, which)
            return None
        return self._settings(cmd.settings)

    def _settings(self, settings: pb.Settings) -> spb.TelemetryCommand:
        now = self._service.clock.now_ms()
        kind = (ClientKind(settings.client_type)
                if settings.client_type in ClientKind._value2member_map_ else None)
        topics: set[str] = set()
        group = None
        if settings.HasField("publishing"):
            topics = {t.name for t in settings.publishing.topics}
        elif settings.HasField("subscription"):
            topics = {s.topic.name for s in settings.subscription.subscriptions}
            group = settings.subscription.group.name or None
        try:
            reply = server_settings(settings, self._service)
        except MessagingError as exc:
            return spb.TelemetryCommand(status=convert.error_status(exc))
        except Refusal as refusal:
            return spb.TelemetryCommand(status=convert.error_status(refusal_error(refusal)))
        self._service.clients.touch(self._client_id, now, kind=kind, group=group, topics=topics)
        return spb.TelemetryCommand(status=convert.status(Code.OK), settings=reply)

    async def _read(self, frames: AsyncIterator[bytes]) -> None:
        try:
            async for raw in frames:
                reply = self.answer(raw)
                if reply is not None:
                    self._out.put_nowait(reply)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.debug("telemetry stream of %s ended: %r", self._client_id, exc)
        finally:
            self._out.put_nowait(_END)

    async def run(self, frames: AsyncIterator[bytes]) -> AsyncIterator[spb.TelemetryCommand]:
        if not self._client_id:
            yield spb.TelemetryCommand(status=convert.status(
                Code.CLIENT_ID_REQUIRED, "the x-mq-client-id header is required"))
            return
        registry = self._service.clients
        registry.attach(self._client_id, self._sink)
        reader = asyncio.create_task(self._read(frames))
        try:
            while (item := await self._out.get()) is not _END:
                yield item
        finally:
            registry.detach(self._client_id, self._sink)
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
