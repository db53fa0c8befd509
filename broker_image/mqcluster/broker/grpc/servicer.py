"""The RPCs of ``apache.rocketmq.v2.MessagingService``: thin translations to the service.

Each method takes a parsed request and the caller's ``CallInfo`` and returns the
response (or yields responses); a ``MessagingError`` raised here becomes the response
status in ``server.py``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from mqcluster.auth.guard import Guard
from mqcluster.auth.model import User
from mqcluster.broker.grpc import convert
from mqcluster.broker.grpc.observe import TrafficObserver
from mqcluster.broker.grpc.routes import RouteProvider
from mqcluster.broker.grpc.send_status import send_error
from mqcluster.broker.messaging.access import Caller
from mqcluster.broker.messaging.clients import ClientKind
from mqcluster.broker.messaging.consume import PopRequest
from mqcluster.broker.messaging.errors import Code, MessagingError
from mqcluster.broker.messaging.naming import check_group, check_topic
from mqcluster.broker.messaging.service import MessagingService

log = logging.getLogger(__name__)

PULL_CHUNK = 32


@dataclass(frozen=True)
class CallInfo:
    """``user`` and ``acl``: who the endpoint authenticated and the policies to check
    them against (None with ACL 2.0 off); ``peer`` is the caller's address."""

    client_id: str
    namespace: str
    time_remaining_s: float | None
    user: User | None = None
    acl: Guard | None = None
    peer: str = ""

    def caller(self) -> Caller:
        return Caller(self.client_id, self.peer, self.user, self.acl)


def _require(value: str, what: str, code: Code = Code.BAD_REQUEST) -> str:
    if not value:
        raise MessagingError(code, f"{what} is required")
    return value


def combined_status(statuses: list[pb.Status]) -> pb.Status:
    codes = {s.code for s in statuses}
    if len(codes) == 1:
        return statuses[0]
    return convert.status(Code.MULTIPLE_RESULTS, "entries have different results")


def _client_kind(value: int) -> ClientKind:
    return ClientKind(value) if value in ClientKind._value2member_map_ else ClientKind.UNSPECIFIED


class MessagingServicer:
    def __init__(self, service: MessagingService, routes: RouteProvider,
                 observer: TrafficObserver | None = None) -> None:
        self.service = service
        self.routes = routes
        self.observer = observer or TrafficObserver(None)

    # ---- routing -------------------------------------------------------------

    async def query_route(self, req: spb.QueryRouteRequest,
                          call: CallInfo) -> spb.QueryRouteResponse:
        topic = req.topic.name
        check_topic(topic)
        routes = await self.routes.route(topic, convert.addresses_of(req.endpoints))
        return spb.QueryRouteResponse(
            status=convert.status(Code.OK),
            message_queues=[convert.message_queue(r, req.topic.resource_namespace) for r in routes],
        )

    async def query_assignment(self, req: spb.QueryAssignmentRequest,
                               call: CallInfo) -> spb.QueryAssignmentResponse:
        check_topic(req.topic.name)
        self.service.catalog.group(req.group.name, call.caller())
        routes = await self.routes.assignment(req.topic.name, req.group.name,
                                              convert.addresses_of(req.endpoints))
        ns = req.topic.resource_namespace
        return spb.QueryAssignmentResponse(
            status=convert.status(Code.OK),
            assignments=[pb.Assignment(message_queue=convert.message_queue(r, ns))
                         for r in routes],
        )

    # ---- client lifecycle ----------------------------------------------------

    async def heartbeat(self, req: spb.HeartbeatRequest, call: CallInfo) -> spb.HeartbeatResponse:
        group = req.group.name if req.HasField("group") else None
        if group:
            self.service.catalog.group(group, call.caller())
        if call.client_id:
            self.service.clients.touch(call.client_id, self.service.clock.now_ms(),
                                       kind=_client_kind(req.client_type), group=group)
        return spb.HeartbeatResponse(status=convert.status(Code.OK))

    async def notify_client_termination(self, req: spb.NotifyClientTerminationRequest,
                                        call: CallInfo) -> spb.NotifyClientTerminationResponse:
        if call.client_id:
            self.service.clients.remove(call.client_id)
        return spb.NotifyClientTerminationResponse(status=convert.status(Code.OK))

    # ---- producing -----------------------------------------------------------

    async def send_message(self, req: spb.SendMessageRequest,
                           call: CallInfo) -> spb.SendMessageResponse:
        if not req.messages:
            raise MessagingError(Code.BAD_REQUEST, "no message in the request")
        parsed = []
        for m in req.messages:
            try:
                parsed.append(convert.outgoing(m))
            except MessagingError as exc:
                parsed.append(exc)  # type: ignore[arg-type]
        valid = [m for m in parsed if not isinstance(m, MessagingError)]
        caller = call.caller()
        results = iter(await self.service.send(valid, caller) if valid else [])
        entries = []
        for m in parsed:
            if isinstance(m, MessagingError):  # (not decoded: the service never saw it)
                self.observer.refused(m.code.name)
                entries.append(spb.SendResultEntry(status=convert.error_status(m)))
                continue
            outcome = next(results)
            error = send_error(outcome)
            if error is None:
                entries.append(spb.SendResultEntry(
                    status=convert.status(Code.OK), message_id=outcome.message_id,
                    transaction_id=outcome.transaction_id, offset=outcome.queue_offset,
                    recall_handle=outcome.recall_handle,
                ))
            else:
                entries.append(spb.SendResultEntry(status=convert.error_status(error)))
        return spb.SendMessageResponse(status=combined_status([e.status for e in entries]),
                                       entries=entries)

    async def end_transaction(self, req: spb.EndTransactionRequest,
                              call: CallInfo) -> spb.EndTransactionResponse:
        tid = _require(req.transaction_id, "transaction_id", Code.INVALID_TRANSACTION_ID)
        if req.resolution == pb.TransactionResolution.COMMIT:
            commit = True
        elif req.resolution == pb.TransactionResolution.ROLLBACK:
            commit = False
        else:
            raise MessagingError(Code.BAD_REQUEST,
                                 "transaction resolution must be COMMIT or ROLLBACK")
        await self.service.transactions.end(tid, req.message_id, commit)
        return spb.EndTransactionResponse(status=convert.status(Code.OK))

    async def recall_message(self, req: spb.RecallMessageRequest,
                             call: CallInfo) -> spb.RecallMessageResponse:
        _require(req.recall_handle, "recall_handle")
        message_id = self.service.delay.recall(req.recall_handle)
        return spb.RecallMessageResponse(status=convert.status(Code.OK), message_id=message_id)

    # ---- consuming -----------------------------------------------------------

    def _long_polling_ms(self, requested_ms: int | None, call: CallInfo) -> int:
        cfg = self.service.config
        ms = (cfg.grpcClientConsumerLongPollingTimeoutMillis if requested_ms is None
              else requested_ms)
        ms = min(ms, cfg.grpcClientConsumerMaxLongPollingTimeoutMillis)
        if call.time_remaining_s is not None:
            ms = min(ms, int((call.time_remaining_s - 0.5) * 1000))
        return max(0, ms)

    async def receive_message(self, req: spb.ReceiveMessageRequest,
                              call: CallInfo) -> AsyncIterator[spb.ReceiveMessageResponse]:
        group = req.group.name
        check_group(group)
        topic = req.message_queue.topic.name
        check_topic(topic)
        cfg = self.service.config
        if req.HasField("invisible_duration"):
            invisible = convert.duration_ms(req.invisible_duration, "invisible_duration")
        else:
            invisible = cfg.defaultInvisibleTimeMills
        polling = (convert.duration_ms(req.long_polling_timeout, "long_polling_timeout")
                   if req.HasField("long_polling_timeout") else None)
        pop = PopRequest(group, topic, req.message_queue.id,
                         convert.filter_of(req.filter_expression),
                         min(req.batch_size, cfg.maxReceiveBatchSize), invisible,
                         owner=call.client_id if req.auto_renew and call.client_id else None)
        if call.client_id:
            self.service.clients.touch(call.client_id, self.service.clock.now_ms(), group=group)
        found = await self.service.receive(pop, self._long_polling_ms(polling, call),
                                           call.caller())
        ns = req.message_queue.topic.resource_namespace
        if not found:
            yield spb.ReceiveMessageResponse(
                status=convert.status(Code.MESSAGE_NOT_FOUND, "no new message"))
            return
        yield spb.ReceiveMessageResponse(status=convert.status(Code.OK))
        yield spb.ReceiveMessageResponse(
            delivery_timestamp=convert.timestamp(self.service.clock.now_ms()))
        for d in found:
            self.observer.delivered(d.topic, len(d.message.body))
            yield spb.ReceiveMessageResponse(message=convert.delivered_message(d, ns))

    async def ack_message(self, req: spb.AckMessageRequest,
                          call: CallInfo) -> spb.AckMessageResponse:
        group = req.group.name
        check_group(group)
        if not req.entries:
            raise MessagingError(Code.BAD_REQUEST, "no entry in the ack request")
        entries = []
        for e in req.entries:
            try:
                await self.service.ack(group, e.receipt_handle)
                st = convert.status(Code.OK)
            except MessagingError as exc:
                st = convert.error_status(exc)
            entries.append(spb.AckMessageResultEntry(message_id=e.message_id,
                                                     receipt_handle=e.receipt_handle, status=st))
        return spb.AckMessageResponse(status=combined_status([e.status for e in entries]),
                                      entries=entries)

    async def change_invisible_duration(self, req: spb.ChangeInvisibleDurationRequest,
                                        call: CallInfo) -> spb.ChangeInvisibleDurationResponse:
        group = req.group.name
        check_group(group)
        invisible = convert.duration_ms(req.invisible_duration, "invisible_duration")
        handle = await self.service.change_invisible(group, req.receipt_handle, invisible)
        return spb.ChangeInvisibleDurationResponse(status=convert.status(Code.OK),
                                                   receipt_handle=handle)

    async def forward_message_to_dead_letter_queue(
            self, req: spb.ForwardMessageToDeadLetterQueueRequest,
            call: CallInfo) -> spb.ForwardMessageToDeadLetterQueueResponse:
        group = req.group.name
        check_group(group)
        await self.service.forward_to_dead_letter(group, req.receipt_handle)
        return spb.ForwardMessageToDeadLetterQueueResponse(status=convert.status(Code.OK))

    # ---- offsets and pull ------------------------------------------------------

    def _queue(self, mq: pb.MessageQueue, call: CallInfo) -> tuple[str, int]:
        check_topic(mq.topic.name)
        self.service.check_queue(mq.topic.name, mq.id, caller=call.caller())
        return mq.topic.name, mq.id

    async def update_offset(self, req: spb.UpdateOffsetRequest,
                            call: CallInfo) -> spb.UpdateOffsetResponse:
        check_group(req.group.name)
        topic, qid = self._queue(req.message_queue, call)
        if req.offset < 0:
            raise MessagingError(Code.ILLEGAL_OFFSET, "offset must not be negative")
        async with self.service.consume.lock(req.group.name):
            self.service.consume.reset_offset(req.group.name, topic, qid, req.offset)
        return spb.UpdateOffsetResponse(status=convert.status(Code.OK))

    async def get_offset(self, req: spb.GetOffsetRequest, call: CallInfo) -> spb.GetOffsetResponse:
        check_group(req.group.name)
        topic, qid = self._queue(req.message_queue, call)
        offset = self.service.consume.committed_offset(req.group.name, topic, qid)
        if offset < 0:
            raise MessagingError(Code.OFFSET_NOT_FOUND,
                                 f"group {req.group.name!r} has no offset on {topic}:{qid}")
        return spb.GetOffsetResponse(status=convert.status(Code.OK), offset=offset)

    async def query_offset(self, req: spb.QueryOffsetRequest,
                           call: CallInfo) -> spb.QueryOffsetResponse:
        topic, qid = self._queue(req.message_queue, call)
        log_ = self.service.log
        if req.query_offset_policy == pb.QueryOffsetPolicy.BEGINNING:
            offset = log_.min_offset(topic, qid)
        elif req.query_offset_policy == pb.QueryOffsetPolicy.END:
            offset = log_.max_offset(topic, qid)
        else:
            if not req.HasField("timestamp"):
                raise MessagingError(Code.BAD_REQUEST, "TIMESTAMP policy needs a timestamp")
            when = convert.timestamp_ms(req.timestamp, "timestamp")
            offset = log_.offset_by_time(topic, qid, when)
        return spb.QueryOffsetResponse(status=convert.status(Code.OK), offset=offset)

    async def pull_message(self, req: spb.PullMessageRequest,
                           call: CallInfo) -> AsyncIterator[spb.PullMessageResponse]:
        check_group(req.group.name)
        self.service.catalog.group(req.group.name, call.caller())
        topic, qid = self._queue(req.message_queue, call)
        if req.offset < 0:
            raise MessagingError(Code.ILLEGAL_OFFSET, "offset must not be negative")
        flt = convert.filter_of(req.filter_expression)
        batch = max(1, min(req.batch_size or PULL_CHUNK, self.service.config.maxReceiveBatchSize))
        wait_ms = self._long_polling_ms(
            convert.duration_ms(req.long_polling_timeout, "long_polling_timeout"), call)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + wait_ms / 1000
        log_ = self.service.log
        while True:
            ticket = self.service.notifier.ticket((topic,))
            res = log_.get_messages(topic, qid, req.offset, batch,
                                    None if flt.matches_all else flt)
            remaining = give_up - loop.time()
            if res.messages or res.next_offset > req.offset or remaining <= 0:
                self.service.notifier.release(ticket)
                break
            await self.service.notifier.wait(ticket, remaining)
        if res.messages:
            yield spb.PullMessageResponse(status=convert.status(Code.OK))
            for m in res.messages:
                yield spb.PullMessageResponse(message=convert.stored_message(m, topic))
        else:
            yield spb.PullMessageResponse(
                status=convert.status(Code.MESSAGE_NOT_FOUND, "no new message"))
        yield spb.PullMessageResponse(next_offset=max(res.next_offset, req.offset))

    async def sync_lite_subscription(self, req: spb.SyncLiteSubscriptionRequest,
                                     call: CallInfo) -> spb.SyncLiteSubscriptionResponse:
        raise MessagingError(Code.UNSUPPORTED, "lite topics are not supported by this broker")
