"""Pop-style consumption: receive with an invisible time, ack, redelivery, retry and DLQ.

A receive holds messages for ``invisible_ms``; an ack within that time finishes them.
When the time passes unacknowledged, a message of an ordinary group is *revived*: copied
to ``%RETRY%<group>`` with RECONSUME_TIME + 1 (or to ``%DLQ%<group>`` once the group's
retryMaxTimes is used up), and receives of its topic deliver the copy. A FIFO group
(``consumeMessageOrderly``) is redelivered in place instead, and a message of a message
group is only handed out while no earlier message of that group is held.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from mqcluster.broker.messaging.catalog import Catalog
from mqcluster.broker.messaging.clock import Clock
from mqcluster.broker.messaging.errors import Code, MessagingError
from mqcluster.broker.messaging.naming import dlq_topic, is_retry_topic, retry_topic
from mqcluster.broker.messaging.properties import PROPERTY_MSG_GROUP
from mqcluster.broker.messaging.queue_state import Entry, QueueState
from mqcluster.broker.messaging.receipt import ReceiptHandle
from mqcluster.broker.messaging.records import (
    dead_letter_record,
    origin_topic,
    read_one,
    reconsume_times,
    retry_record,
)
from mqcluster.broker.messaging.store_port import MessageLog
from mqcluster.store.filter import TagFilter
from mqcluster.store.message import StoredMessage
from mqcluster.store.subscription_group import SubscriptionGroupConfig

log = logging.getLogger(__name__)

StateKey = tuple[str, str, int]
READ_CHUNK = 32
MAX_READS_PER_POP = 64


@dataclass(frozen=True)
class PopRequest:
    group: str
    topic: str
    queue_id: int
    filter: TagFilter
    batch_size: int
    invisible_ms: int
    owner: str | None = None
    """Client that asked for automatic renewal (a push consumer); None for none."""


@dataclass(frozen=True)
class Delivery:
    message: StoredMessage
    topic: str
    receipt: ReceiptHandle
    attempt: int
    invisible_ms: int


class ConsumeService:
    def __init__(self, log_: MessageLog, catalog: Catalog, clock: Clock, broker_name: str,
                 renew_max_ms: int = 3 * 3600 * 1000) -> None:
        self._renew_max_ms = renew_max_ms
        self._log = log_
        self._catalog = catalog
        self._clock = clock
        self._broker = broker_name
        self._states: dict[StateKey, QueueState] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    # ---- state -------------------------------------------------------------

    def state(self, group: str, topic: str, queue_id: int) -> QueueState:
        key = (group, topic, queue_id)
        st = self._states.get(key)
        if st is None:
            committed = self._log.offsets.query(group, topic, queue_id)
            if committed < 0:
                cfg = self._catalog.known_group(group)
                from_min = cfg is None or cfg.consumeFromMinEnable or is_retry_topic(topic)
                committed = (self._log.min_offset(topic, queue_id) if from_min
                             else self._log.max_offset(topic, queue_id))
            st = self._states[key] = QueueState(committed)
        return st

    def forget_deliveries(self) -> None:
        """Drop what this broker handed out and what it read ahead, keeping the committed
        offsets. For a replica that becomes master again: while another led, the
        messages it held may have been delivered and acknowledged there, or never have
        reached a consumer; holding them until their old invisible time ends would stall
        FIFO groups behind them. Delivery resumes from the committed offsets instead
        (at least once, in order)."""
        self._states.clear()

    def existing_state(self, group: str, topic: str, queue_id: int) -> QueueState | None:
        return self._states.get((group, topic, queue_id))

    def states_of(self, group: str) -> Iterator[tuple[StateKey, QueueState]]:
        for key, st in list(self._states.items()):
            if key[0] == group:
                yield key, st

    def groups(self) -> set[str]:
        return {k[0] for k in self._states}

    def lock(self, group: str) -> asyncio.Lock:
        lk = self._locks.get(group)
        if lk is None:
            lk = self._locks[group] = asyncio.Lock()
        return lk

    def reset_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self._log.offsets.commit(group, topic, queue_id, offset)
        st = self._states.get((group, topic, queue_id))
        if st is not None:
            st.reset(offset)

    def committed_offset(self, group: str, topic: str, queue_id: int) -> int:
        st = self._states.get((group, topic, queue_id))
        return st.committed if st is not None else self._log.offsets.query(group, topic, queue_id)

    def _commit(self, key: StateKey, st: QueueState) -> None:
        if self._log.offsets.query(*key) != st.committed:
            self._log.offsets.commit(key[0], key[1], key[2], st.committed)

    def next_wakeup(self, group: str, topic: str, queue_id: int) -> int | None:
        """When a held message of this receive's queues expires (and may be handed out)."""
        now = self._clock.now_ms()
        times = [st.next_deadline(now) for st in (
            self._states.get((group, topic, queue_id)),
            self._states.get((group, retry_topic(group), 0)),
        ) if st is not None]
        deadlines = [t for t in times if t is not None]
        return min(deadlines) if deadlines else None

    # ---- receive -----------------------------------------------------------

    async def pop(self, req: PopRequest) -> list[Delivery]:
        gcfg = self._catalog.group(req.group)
        async with self.lock(req.group):
            now = self._clock.now_ms()
            fifo = gcfg.consumeMessageOrderly
            out: list[Delivery] = []
            key = (req.group, req.topic, req.queue_id)
            st = self.state(*key)
            if not fifo:
                await self._revive_state(gcfg, key, st, now)
                rkey = (req.group, retry_topic(req.group), 0)
                if self._log.topics.get(rkey[1]) is not None:
                    rst = self.state(*rkey)
                    await self._revive_state(gcfg, rkey, rst, now)
                    self._take_retry(req, rkey, rst, now, out)
                    self._commit(rkey, rst)
            await self._take_queue(req, gcfg, key, st, now, out)
            self._commit(key, st)
            return out

    def _deliver(self, req: PopRequest, key: StateKey, st: QueueState, entry: Entry,
                 msg: StoredMessage, now: int, base_attempt: int) -> Delivery:
        st.hold(entry, now, req.invisible_ms, owner=req.owner, renew_for_ms=self._renew_max_ms)
        receipt = ReceiptHandle(key[1], key[2], entry.offset, now, req.invisible_ms,
                                entry.epoch, self._broker)
        return Delivery(msg, origin_topic(msg), receipt, base_attempt + entry.deliveries,
                        req.invisible_ms)

    def _take_retry(self, req: PopRequest, key: StateKey, st: QueueState, now: int,
                    out: list[Delivery]) -> None:
        for entry in st.candidates(now, fifo=False, topic=req.topic):
            if len(out) >= req.batch_size:
                return
            msg = read_one(self._log, key[1], key[2], entry.offset)
            if msg is None or not req.filter(msg):
                st.done(entry.offset)
                continue
            out.append(self._deliver(req, key, st, entry, msg, now, reconsume_times(msg)))
        for _ in range(MAX_READS_PER_POP):
            if len(out) >= req.batch_size:
                return
            res = self._log.get_messages(key[1], key[2], st.next_new, READ_CHUNK)
            start = st.next_new
            for msg in res.messages:
                if len(out) >= req.batch_size:
                    return
                st.skip_to(msg.queue_offset)
                origin = origin_topic(msg)
                entry = st.add(msg.queue_offset, for_topic=origin)
                if origin != req.topic:
                    continue
                if not req.filter(msg):
                    st.done(entry.offset)
                    continue
                out.append(self._deliver(req, key, st, entry, msg, now, reconsume_times(msg)))
            st.skip_to(res.next_offset)
            if st.next_new <= start:
                return

    async def _take_queue(self, req: PopRequest, gcfg: SubscriptionGroupConfig, key: StateKey,
                          st: QueueState, now: int, out: list[Delivery]) -> None:
        fifo = gcfg.consumeMessageOrderly
        max_attempts = gcfg.retryMaxTimes + 1
        withheld = st.blocked_groups(now) if fifo else set()
        store_filter = None if req.filter.matches_all else req.filter
        for entry in st.candidates(now, fifo=fifo):
            if len(out) >= req.batch_size:
                if entry.message_group is not None:
                    withheld.add(entry.message_group)
                continue
            msg = read_one(self._log, key[1], key[2], entry.offset)
            if msg is None or not req.filter(msg):
                st.done(entry.offset)
                continue
            if entry.deliveries + reconsume_times(msg) >= max_attempts:
                await self._dead_letter(req.group, msg, entry.deliveries + reconsume_times(msg))
                st.done(entry.offset)
                continue
            out.append(self._deliver(req, key, st, entry, msg, now, reconsume_times(msg)))
        if fifo:
            withheld |= {e.message_group for e in st.candidates(now, fifo=True)
                         if e.message_group is not None and not e.held(now)}
        for _ in range(MAX_READS_PER_POP):
            if len(out) >= req.batch_size:
                return
            res = self._log.get_messages(key[1], key[2], st.next_new, READ_CHUNK, store_filter)
            start = st.next_new
            for msg in res.messages:
                if len(out) >= req.batch_size:
                    return
                st.skip_to(msg.queue_offset)
                group = msg.properties.get(PROPERTY_MSG_GROUP) if fifo else None
                entry = st.add(msg.queue_offset, message_group=group)
                if group is not None and group in withheld:
                    continue
                out.append(self._deliver(req, key, st, entry, msg, now, reconsume_times(msg)))
            st.skip_to(res.next_offset)
            if st.next_new <= start:
                return

    # ---- redelivery ----------------------------------------------------------

    def renew(self, alive: Callable[[str], bool], ahead_ms: int, extend_ms: int) -> int:
        """Extend the invisible time of auto-renewed messages whose owner is still alive.

        Receipt handles stay valid: a renewal moves the deadline, not the epoch.
        """
        now = self._clock.now_ms()
        renewed = 0
        for st in list(self._states.values()):
            for entry in st.renewable(now, ahead_ms):
                if entry.owner is not None and alive(entry.owner):
                    entry.deadline_ms = now + extend_ms
                    renewed += 1
        return renewed

    async def revive(self) -> int:
        """Revive every expired message of every ordinary group; returns how many moved."""
        moved = 0
        now = self._clock.now_ms()
        for group in sorted(self.groups()):
            gcfg = self._catalog.known_group(group)
            if gcfg is None or gcfg.consumeMessageOrderly:
                continue
            async with self.lock(group):
                for key, st in self.states_of(group):
                    moved += await self._revive_state(gcfg, key, st, now)
        return moved

    async def _revive_state(self, gcfg: SubscriptionGroupConfig, key: StateKey, st: QueueState,
                            now: int) -> int:
        moved = 0
        for entry in st.expired(now):
            msg = read_one(self._log, key[1], key[2], entry.offset)
            if msg is None:
                st.done(entry.offset)
                continue
            next_reconsume = reconsume_times(msg) + 1
            if next_reconsume > gcfg.retryMaxTimes:
                ok = await self._dead_letter(gcfg.groupName, msg, next_reconsume)
            else:
                rtopic = retry_topic(gcfg.groupName)
                self._catalog.system_topic(rtopic, 1)
                result = await self._log.put_message(retry_record(msg, rtopic, next_reconsume))
                ok = result.status.stored
            if ok:
                st.done(entry.offset)
                moved += 1
            else:
                log.warning("revive of %s offset %d failed; will retry", key, entry.offset)
        if moved:
            self._commit(key, st)
        return moved

    async def _dead_letter(self, group: str, msg: StoredMessage, reconsume: int) -> bool:
        topic = dlq_topic(group)
        self._catalog.system_topic(topic, 1)
        result = await self._log.put_message(dead_letter_record(msg, topic, reconsume))
        if not result.status.stored:
            log.warning("dead-lettering a message of group %s failed: %s", group, result.status)
        return result.status.stored

    # ---- handles -------------------------------------------------------------

    def _held(self, group: str, handle: str) -> tuple[StateKey, QueueState, Entry, ReceiptHandle]:
        rh = ReceiptHandle.decode(handle)
        if rh.broker_name != self._broker:
            raise MessagingError(
                Code.INVALID_RECEIPT_HANDLE,
                f"receipt handle belongs to broker {rh.broker_name!r}, not {self._broker!r}",
            )
        key = (group, rh.topic, rh.queue_id)
        st = self._states.get(key)
        if st is None:
            raise MessagingError(
                Code.INVALID_RECEIPT_HANDLE, "receipt handle is unknown to this consumer group"
            )
        entry = st.check_held(rh.offset, rh.epoch, self._clock.now_ms())
        return key, st, entry, rh

    async def ack(self, group: str, handle: str) -> None:
        async with self.lock(group):
            key, st, entry, _ = self._held(group, handle)
            st.done(entry.offset)
            self._commit(key, st)

    async def change_invisible(self, group: str, handle: str, invisible_ms: int) -> ReceiptHandle:
        async with self.lock(group):
            _, st, entry, rh = self._held(group, handle)
            now = self._clock.now_ms()
            st.change_invisible(entry, now, invisible_ms)
            return ReceiptHandle(rh.topic, rh.queue_id, rh.offset, now, invisible_ms,
                                 entry.epoch, self._broker)

    async def forward_to_dead_letter(self, group: str, handle: str) -> None:
        async with self.lock(group):
            key, st, entry, _ = self._held(group, handle)
            msg = read_one(self._log, key[1], key[2], entry.offset)
            if msg is not None and not await self._dead_letter(
                    group, msg, reconsume_times(msg) + entry.deliveries):
                raise MessagingError(Code.INTERNAL_SERVER_ERROR,
                                     "failed to write the dead-letter message")
            st.done(entry.offset)
            self._commit(key, st)
