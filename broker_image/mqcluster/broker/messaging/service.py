"""The message service: one object the gRPC endpoint (or any other front end) calls.

It owns the parts (send, consume, delay, transactions, clients) and one background
task that, every ``reviveIntervalMills`` or when a delayed message falls due, revives
expired messages, releases due delayed messages and sends transaction check-backs.
``tick()`` does one such round and is what tests drive with a fake clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

from mqcluster.broker.messaging.access import ANONYMOUS, Caller, check_read_queue
from mqcluster.broker.messaging.catalog import Catalog
from mqcluster.broker.messaging.clients import ClientRegistry
from mqcluster.broker.messaging.clock import Clock, SystemClock
from mqcluster.broker.messaging.config import MessagingConfig
from mqcluster.broker.messaging.consume import ConsumeService, Delivery, PopRequest
from mqcluster.broker.messaging.delay import DelayService
from mqcluster.broker.messaging.errors import Code, MessagingError
from mqcluster.broker.messaging.naming import SCHEDULE_TOPIC, check_topic, retry_topic
from mqcluster.broker.messaging.notifier import ArrivalNotifier
from mqcluster.broker.messaging.receipt import ReceiptHandle
from mqcluster.broker.messaging.send import OutgoingMessage, PutMetrics, SendOutcome, SendService
from mqcluster.broker.messaging.store_port import BatchLog, MessageLog
from mqcluster.broker.messaging.transaction import CheckRequest, TransactionService
from mqcluster.store.topic_config import TopicConfig

log = logging.getLogger(__name__)

CLIENT_EXPIRY_MS = 120_000
ANY_QUEUE = -1


class MessagingService:
    def __init__(self, log_: MessageLog, config: MessagingConfig, *, clock: Clock | None = None,
                 on_topic_created: Callable[[], None] | None = None,
                 broker_permission: Callable[[], int] | None = None,
                 is_master: Callable[[], bool] | None = None, where: str | None = None,
                 metrics: PutMetrics | None = None) -> None:
        self.log = log_
        self.config = config
        self.clock: Clock = clock or SystemClock()
        roles: dict[str, Any] = {}
        if broker_permission is not None:
            roles["broker_permission"] = broker_permission
        if is_master is not None:
            roles["is_master"] = is_master
        self.catalog = Catalog(log_, config, on_topic_created, where=where, **roles)
        self.consume = ConsumeService(log_, self.catalog, self.clock, config.brokerName,
                                      config.renewMaxTimeMillis)
        self.delay = DelayService(log_, self.catalog, self.clock)
        self.transactions = TransactionService(log_, self.catalog, self.clock, config)
        self.sender = SendService(
            log_, self.catalog.access, limits=lambda: config, clock=self.clock, fields=config,
            batches=cast(BatchLog, log_) if hasattr(log_, "put_batches") else None,
            metrics=metrics, delay=self.delay, transactions=self.transactions)
        self.clients = ClientRegistry()
        self.notifier = ArrivalNotifier()
        self._task: asyncio.Task[None] | None = None
        self._kick = asyncio.Event()
        self._next_queue: dict[tuple[str, str], int] = {}
        self._started = False

    # ---- lifecycle -----------------------------------------------------------

    def took_over(self) -> None:
        """This replicated broker became master (again, or in a new epoch): consumers
        start again from the groups' committed offsets (``ConsumeService.forget_deliveries``)."""
        self.consume.forget_deliveries()

    def load(self) -> None:
        """Rebuild delayed and half-message indexes from the store (idempotent)."""
        if self._started:
            return
        self._started = True
        self.log.add_arrival_listener(self._on_arrival)
        self.delay.scan()
        self.transactions.load()

    async def start(self) -> None:
        self.load()
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="messaging-timer")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _on_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        self.notifier.notify(topic, queue_id, max_offset)
        if topic == SCHEDULE_TOPIC:
            self._kick.set()

    async def _run(self) -> None:
        interval_s = self.config.reviveIntervalMills / 1000
        while True:
            self._kick.clear()
            try:
                await self.tick()
            except Exception:
                log.exception("messaging timer round failed")
            wait_s = interval_s
            due = self.delay.next_due()
            if due is not None:
                wait_s = min(wait_s, max(0.0, (due - self.clock.now_ms()) / 1000))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._kick.wait(), wait_s)

    async def tick(self) -> list[CheckRequest]:
        """One timer round; returns the check-backs that found no producer to ask."""
        since = self.clock.now_ms() - CLIENT_EXPIRY_MS
        self.consume.renew(lambda client: self.clients.alive(client, since),
                           self.config.renewAheadTimeMillis, self.config.defaultInvisibleTimeMills)
        await self.consume.revive()
        await self.delay.deliver_due()
        undelivered: list[CheckRequest] = []
        for check in await self.transactions.due_checks():
            sink = self.clients.producer_sink(check.topic)
            if sink is None:
                undelivered.append(check)
                continue
            try:
                sink(check)
            except Exception:
                log.exception("sending a transaction check-back failed")
        self.clients.expire(self.clock.now_ms() - CLIENT_EXPIRY_MS)
        return undelivered

    # ---- operations ----------------------------------------------------------

    async def send(self, messages: list[OutgoingMessage],
                   caller: Caller = ANONYMOUS) -> list[SendOutcome]:
        """Each message stored or refused on its own (``SendOutcome.refusal``)."""
        if not messages:
            raise MessagingError(Code.BAD_REQUEST, "no message in the request")
        return [await self.sender.send(msg, caller) for msg in messages]

    def check_invisible(self, invisible_ms: int, *, for_receive: bool) -> None:
        low = self.config.minInvisibleTimeMillsForRecv if for_receive else 0
        high = self.config.maxInvisibleTimeMills
        if not low <= invisible_ms <= high:
            raise MessagingError(
                Code.ILLEGAL_INVISIBLE_TIME,
                f"invisible duration {invisible_ms} ms is outside [{low}, {high}] ms",
            )

    def check_queue(self, topic: str, queue_id: int, *, any_queue: bool = False,
                    caller: Caller = ANONYMOUS) -> TopicConfig:
        """The topic's config when ``caller`` may read it here and ``queue_id`` is one of
        its read queues (or ANY_QUEUE, if allowed); raises Refusal (the remoting pull's
        rules, ``TopicAccess.for_read``) or MessagingError (a name gRPC refuses)."""
        check_topic(topic)
        cfg = self.catalog.access.for_read(topic, caller)
        check_read_queue(queue_id, cfg, any_queue=any_queue)
        return cfg

    def _wake_receivers(self, handle: str) -> None:
        """An ack or a shorter invisible time may unblock FIFO groups or end a wait early."""
        self.notifier.notify(ReceiptHandle.decode(handle).topic)

    async def ack(self, group: str, handle: str) -> None:
        await self.consume.ack(group, handle)
        self._wake_receivers(handle)

    async def change_invisible(self, group: str, handle: str, invisible_ms: int) -> str:
        self.check_invisible(invisible_ms, for_receive=False)
        renewed = await self.consume.change_invisible(group, handle, invisible_ms)
        self._wake_receivers(handle)
        return renewed.encode()

    async def forward_to_dead_letter(self, group: str, handle: str) -> None:
        await self.consume.forward_to_dead_letter(group, handle)
        self._wake_receivers(handle)

    def _queue_order(self, req: PopRequest, queue_nums: int) -> list[int]:
        """Every readable queue, from the asked one (or round robin for ANY_QUEUE)."""
        if req.queue_id == ANY_QUEUE:
            key = (req.group, req.topic)
            first = self._next_queue.get(key, 0) % queue_nums
            self._next_queue[key] = first + 1
        else:
            first = req.queue_id
        return [(first + i) % queue_nums for i in range(queue_nums)]

    async def _pop_all(self, req: PopRequest, queue_ids: list[int]) -> list[Delivery]:
        found: list[Delivery] = []
        for qid in queue_ids:
            if len(found) >= req.batch_size:
                break
            found += await self.consume.pop(
                replace(req, queue_id=qid, batch_size=req.batch_size - len(found)))
        return found

    async def receive(self, req: PopRequest, long_polling_ms: int,
                      caller: Caller = ANONYMOUS) -> list[Delivery]:
        """Pop from the topic's queues on this broker (as RocketMQ's proxy does, the
        request's queue only decides where to start); when nothing is there, wait up to
        ``long_polling_ms`` for an arrival, an ack or an invisible time running out."""
        cfg = self.check_queue(req.topic, req.queue_id, any_queue=True, caller=caller)
        if req.batch_size <= 0:
            raise MessagingError(Code.BAD_REQUEST, "batch size must be positive")
        self.check_invisible(req.invisible_ms, for_receive=True)
        queue_ids = self._queue_order(req, max(1, cfg.readQueueNums))
        loop = asyncio.get_running_loop()
        give_up = loop.time() + max(0, long_polling_ms) / 1000
        while True:
            ticket = self.notifier.ticket((req.topic, retry_topic(req.group)))
            try:
                found = await self._pop_all(req, queue_ids)
            except BaseException:
                self.notifier.release(ticket)
                raise
            remaining = give_up - loop.time()
            if found or remaining <= 0:
                self.notifier.release(ticket)
                return found
            wakes = [w for w in (self.consume.next_wakeup(req.group, req.topic, q)
                                 for q in queue_ids) if w is not None]
            if wakes:
                wait_s = max(0.0, (min(wakes) - self.clock.now_ms()) / 1000) + 0.005
                remaining = min(remaining, wait_s)
            await self.notifier.wait(ticket, remaining)
