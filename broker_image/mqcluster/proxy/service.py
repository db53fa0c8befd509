"""The cluster proxy's MessagingService: each call goes to the group it concerns.

- QueryRoute, QueryAssignment, Heartbeat, NotifyClientTermination: every group with a
  usable master, answers merged (routes.py).
- SendMessage: a group whose routes have writable queues for the topic, round robin
  over the usable ones (a group that stopped answering gets none); a FIFO message's
  group is fixed by a hash of its message group, as RocketMQ's Proxy picks its queue.
- ReceiveMessage, PullMessage and the offset calls: the queue's broker name.
- AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue: the group in
  the receipt handle; EndTransaction and RecallMessage: the group wrapped into the
  transaction id or recall handle (tokens.py).

A group that cannot be reached answers at once with a RocketMQ status
(HA_NOT_AVAILABLE, PROXY_TIMEOUT) instead of holding the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import grpc
from google.protobuf.message import DecodeError, Message
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from mqcluster.proxy import routes, tokens
from mqcluster.proxy.groups import GroupTable
from mqcluster.proxy.upstream import SERVICE, Metadata, Unreachable, Upstream

log = logging.getLogger(__name__)

Context = Any
R = TypeVar("R", bound=Message)
ROUTE_TTL_S = 30.0
# Metadata the transport sets itself; passing it on would confuse the next hop.
_TRANSPORT_KEYS = frozenset({"user-agent", "grpc-accept-encoding", "grpc-timeout"})


def metadata_of(context: Context) -> Metadata:
    return tuple((k, v) for k, v in (context.invocation_metadata() or ())
                 if k not in _TRANSPORT_KEYS and not k.startswith(":"))


def bad_request(message: str) -> pb.Status:
    return routes.status(pb.Code.BAD_REQUEST, message)


@dataclass
class TopicGroups:
    writable: frozenset[str]
    at: float


class ProxyService:
    def __init__(self, table: GroupTable, upstream: Upstream,
                 on_fail_fast: Callable[[str, int], None] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 topic_groups: Callable[[str], Awaitable[set[str] | None]] | None = None
                 ) -> None:
        self.table = table
        self.topic_groups = topic_groups
        """Where the name servers route a topic (None: unknown); only those groups are
        asked for its routes, as RocketMQ's Proxy reads routes from the name servers."""
        self.up = upstream
        self.clock = clock
        self.on_fail_fast = on_fail_fast
        self._topics: dict[str, TopicGroups] = {}
        self._turn = itertools.count()

    def _failed(self, exc: Unreachable) -> pb.Status:
        if self.on_fail_fast is not None:
            self.on_fail_fast(exc.group, exc.code)
        return routes.status(exc.code, str(exc))

    # ---- fan-out calls

    async def _each(self, method: str, request: bytes, context: Context,
                    answer: type[R], topic: str | None = None) -> dict[str, R]:
        """``method`` on every usable group at once (those carrying ``topic`` where the
        name servers know it); groups that fail are left out (a status the caller merges
        in)."""
        only = await self.topic_groups(topic) if topic and self.topic_groups else None
        groups = [g for g in self.table.usable_groups() if only is None or g in only]
        md, left = metadata_of(context), context.time_remaining()

        async def one(group: str) -> R:
            try:
                raw = await self.up.unary(group, method, request, md, left, wait=False)
            except Unreachable as exc:
                return cast(R, answer(status=self._failed(exc)))
            except grpc.aio.AioRpcError as exc:
                return cast(R, answer(status=routes.status(pb.Code.INTERNAL_SERVER_ERROR,
                                                   f"{exc.code().name}: {exc.details()}")))
            return cast(R, answer.FromString(raw))

        if not groups and self.table.names():
            # No group usable right now: wait (bounded) for one rather than fail at once.
            with contextlib.suppress(Unreachable):
                await self.up.master(self.table.names()[0], left)
            groups = [g for g in self.table.usable_groups() if only is None or g in only]
        results = await asyncio.gather(*(one(g) for g in groups))
        return dict(zip(groups, results, strict=True))

    async def query_route(self, raw: bytes, context: Context) -> spb.QueryRouteResponse:
        req = spb.QueryRouteRequest.FromString(raw)
        answers = await self._each("QueryRoute", raw, context, spb.QueryRouteResponse,
                                   req.topic.name)
        merged = routes.merge_routes(answers, req.topic.name,
                                     req.endpoints if req.HasField("endpoints") else None)
        if merged.status.code == pb.Code.OK:
            self._topics[req.topic.name] = TopicGroups(routes.writable_groups(merged),
                                                       self.clock())
        return merged

    async def query_assignment(self, raw: bytes, context: Context) -> spb.QueryAssignmentResponse:
        req = spb.QueryAssignmentRequest.FromString(raw)
        answers = await self._each("QueryAssignment", raw, context,
                                   spb.QueryAssignmentResponse, req.topic.name)
        return routes.merge_assignments(answers, req.topic.name,
                                        req.endpoints if req.HasField("endpoints") else None)

    async def heartbeat(self, raw: bytes, context: Context) -> spb.HeartbeatResponse:
        answers = await self._each("Heartbeat", raw, context, spb.HeartbeatResponse)
        return spb.HeartbeatResponse(status=_first_ok(answers))

    async def notify_client_termination(
            self, raw: bytes, context: Context) -> spb.NotifyClientTerminationResponse:
        answers = await self._each("NotifyClientTermination", raw, context,
                                   spb.NotifyClientTerminationResponse)
        return spb.NotifyClientTerminationResponse(status=_first_ok(answers))

    # ---- sending

    async def _topic_groups(self, topic: str, context: Context) -> frozenset[str]:
        known = self._topics.get(topic)
        if known is None or self.clock() - known.at > ROUTE_TTL_S:
            req = spb.QueryRouteRequest(topic=pb.Resource(name=topic))
            await self.query_route(req.SerializeToString(), context)
            known = self._topics.get(topic)
        return known.writable if known else frozenset()

    def send_candidates(self, groups: frozenset[str], message_group: str | None) -> list[str]:
        """Groups to try in order: a FIFO message's one group (by a stable hash of its
        message group over every writable group), else the usable groups round robin."""
        ordered = sorted(groups)
        if not ordered:
            return []
        if message_group:
            return [ordered[zlib.crc32(message_group.encode()) % len(ordered)]]
        usable = [g for g in ordered if self.table.usable(g)] or ordered
        start = next(self._turn) % len(usable)
        return usable[start:] + usable[:start]

    async def send_message(self, raw: bytes,
                           context: Context) -> spb.SendMessageResponse | bytes:
        first = first_message(raw)
        if first is None:
            return spb.SendMessageResponse(status=bad_request("no message in the request"))
        topic = first.topic.name
        fifo = (first.system_properties.message_group
                if first.system_properties.HasField("message_group") else None)
        groups = await self._topic_groups(topic, context)
        candidates = self.send_candidates(groups, fifo) or self.table.usable_groups()[:1] \
            or self.table.names()[:1]
        if not candidates:
            return spb.SendMessageResponse(status=routes.no_group_status(topic))
        md = metadata_of(context)
        failure: Unreachable | None = None
        for group in candidates:
            try:
                answer = await self.up.unary(group, "SendMessage", raw, md,
                                             context.time_remaining(),
                                             wait=group == candidates[-1])
            except Unreachable as exc:
                failure = exc
                continue
            resp = spb.SendMessageResponse.FromString(answer)
            if not any(e.transaction_id or e.recall_handle for e in resp.entries):
                return answer  # nothing to tag with the group: the broker's bytes as they are
            for entry in resp.entries:
                entry.transaction_id = tokens.wrap(group, entry.transaction_id)
                entry.recall_handle = tokens.wrap(group, entry.recall_handle)
            return resp
        assert failure is not None
        return spb.SendMessageResponse(status=self._failed(failure))

    async def end_transaction(self, raw: bytes, context: Context) -> spb.EndTransactionResponse:
        req = spb.EndTransactionRequest.FromString(raw)
        try:
            group, req.transaction_id = tokens.unwrap(req.transaction_id, "transaction_id")
        except tokens.TokenError as exc:
            return spb.EndTransactionResponse(
                status=routes.status(pb.Code.INVALID_TRANSACTION_ID, str(exc)))
        return await self._to_group(group, "EndTransaction", req.SerializeToString(), context,
                                    spb.EndTransactionResponse)

    async def recall_message(self, raw: bytes, context: Context) -> spb.RecallMessageResponse:
        req = spb.RecallMessageRequest.FromString(raw)
        try:
            group, req.recall_handle = tokens.unwrap(req.recall_handle, "recall_handle")
        except tokens.TokenError as exc:
            return spb.RecallMessageResponse(status=bad_request(str(exc)))
        return await self._to_group(group, "RecallMessage", req.SerializeToString(), context,
                                    spb.RecallMessageResponse)

    # ---- one group's calls

    async def _to_group(self, group: str, method: str, raw: bytes, context: Context,
                        answer: type[R]) -> R:
        try:
            out = await self.up.unary(group, method, raw, metadata_of(context),
                                      context.time_remaining())
        except Unreachable as exc:
            return cast(R, answer(status=self._failed(exc)))
        return cast(R, answer.FromString(out))

    def by_queue(self, method: str, req_type: type[Message],
                 answer: type[R]) -> Callable[[bytes, Context], Awaitable[R]]:
        async def handle(raw: bytes, context: Context) -> R:
            req: Any = req_type.FromString(raw)
            group = req.message_queue.broker.name
            if not group:
                return cast(R, answer(status=bad_request("message_queue.broker.name is required")))
            return await self._to_group(group, method, raw, context, answer)
        return handle

    def by_receipt(self, method: str, req_type: type[Message],
                   answer: type[R]) -> Callable[[bytes, Context], Awaitable[R]]:
        async def handle(raw: bytes, context: Context) -> R:
            req: Any = req_type.FromString(raw)
            try:
                group = tokens.receipt_group(req.receipt_handle)
            except tokens.TokenError as exc:
                return cast(R, answer(
                    status=routes.status(pb.Code.INVALID_RECEIPT_HANDLE, str(exc))))
            return await self._to_group(group, method, raw, context, answer)
        return handle

    async def ack_message(self, raw: bytes, context: Context) -> spb.AckMessageResponse:
        """Entries go to the group of each one's receipt handle (one call per group)."""
        req = spb.AckMessageRequest.FromString(raw)
        by_group: dict[str, list[int]] = {}
        bad: dict[int, spb.AckMessageResultEntry] = {}
        for i, e in enumerate(req.entries):
            try:
                by_group.setdefault(tokens.receipt_group(e.receipt_handle), []).append(i)
            except tokens.TokenError as exc:
                bad[i] = spb.AckMessageResultEntry(
                    message_id=e.message_id, receipt_handle=e.receipt_handle,
                    status=routes.status(pb.Code.INVALID_RECEIPT_HANDLE, str(exc)))
        if len(by_group) == 1 and not bad:
            return await self._to_group(next(iter(by_group)), "AckMessage", raw, context,
                                        spb.AckMessageResponse)

        async def part(group: str, idx: list[int]) -> list[spb.AckMessageResultEntry]:
            sub = spb.AckMessageRequest(group=req.group, topic=req.topic,
                                        entries=[req.entries[i] for i in idx])
            resp = await self._to_group(group, "AckMessage", sub.SerializeToString(), context,
                                        spb.AckMessageResponse)
            if resp.entries:
                return list(resp.entries)
            return [spb.AckMessageResultEntry(message_id=req.entries[i].message_id,
                                              receipt_handle=req.entries[i].receipt_handle,
                                              status=resp.status) for i in idx]

        parts = await asyncio.gather(*(part(g, idx) for g, idx in by_group.items()))
        placed = dict(bad)
        for (_, idx), entries in zip(by_group.items(), parts, strict=True):
            placed.update(zip(idx, entries, strict=False))
        entries = [placed[i] for i in sorted(placed)]
        codes = {e.status.code for e in entries}
        top = (entries[0].status if len(codes) == 1 else
               routes.status(pb.Code.MULTIPLE_RESULTS, "entries have different results"))
        if not entries:
            top = bad_request("no entry in the ack request")
        return spb.AckMessageResponse(status=top, entries=entries)

    # ---- streams

    def stream_by_queue(self, method: str, req_type: type[Message],
                        answer: type[Message]) -> Callable[[bytes, Context], AsyncIterator[Any]]:
        async def handle(raw: bytes, context: Context) -> AsyncIterator[Any]:
            try:
                req: Any = req_type.FromString(raw)
            except DecodeError as exc:
                yield answer(status=bad_request(f"malformed {req_type.DESCRIPTOR.name}: {exc}"))
                return
            group = req.message_queue.broker.name
            if not group:
                yield answer(status=bad_request("message_queue.broker.name is required"))
                return
            started = False
            try:
                async for item in self.up.stream(group, method, raw, metadata_of(context),
                                                 context.time_remaining()):
                    started = True
                    yield item
            except Unreachable as exc:
                status = self._failed(exc)
                if not started:
                    yield answer(status=status)
        return handle


_MESSAGES_TAG = 0x0A  # SendMessageRequest.messages: field 1, length-delimited


def first_message(raw: bytes) -> pb.Message | None:
    """The first message of a SendMessageRequest, parsed alone: its topic and message
    group choose the group, the broker parses (and checks) the whole request. None when
    the request holds no message; a layout other than the usual one is parsed whole."""
    if raw[:1] == bytes([_MESSAGES_TAG]):
        length, shift, i = 0, 0, 1
        while i < len(raw) and i < 11:
            byte = raw[i]
            length |= (byte & 0x7F) << shift
            i += 1
            if not byte & 0x80:
                if i + length <= len(raw):
                    return pb.Message.FromString(raw[i:i + length])
                break
            shift += 7
    req = spb.SendMessageRequest.FromString(raw)
    return req.messages[0] if req.messages else None


def _first_ok(answers: dict[str, Any]) -> pb.Status:
    statuses = [a.status for a in answers.values()]
    ok = [s for s in statuses if s.code == pb.Code.OK]
    if ok:
        return ok[0]
    return statuses[0] if statuses else routes.status(
        pb.Code.HA_NOT_AVAILABLE, "no broker group with a reachable master")


__all__ = ["SERVICE", "ProxyService"]
