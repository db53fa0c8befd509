"""Delayed messages: parked in the schedule topic, released to their topic when due.

The schedule topic (one queue) is the durable record; this keeps an in-memory heap
of what is not released yet, rebuilt from the group progress of the schedule queue
on start. ``deliver_due`` is driven by the caller (a timer in production, a fake
clock in tests).
"""

from __future__ import annotations

import base64
import binascii
import heapq
import logging

from mqcluster.broker.messaging import properties as p
from mqcluster.broker.messaging.catalog import Catalog
from mqcluster.broker.messaging.clock import Clock
from mqcluster.broker.messaging.errors import Code, MessagingError
from mqcluster.broker.messaging.naming import SCHEDULE_PROGRESS_GROUP, SCHEDULE_TOPIC
from mqcluster.broker.messaging.queue_state import QueueState
from mqcluster.broker.messaging.records import read_one, release_record
from mqcluster.broker.messaging.store_port import MessageLog
from mqcluster.store.message import MessageRecord, PutResult

log = logging.getLogger(__name__)

SCAN_CHUNK = 256


def encode_recall_handle(offset: int, message_id: str) -> str:
    return base64.urlsafe_b64encode(f"1 {offset} {message_id}".encode()).decode()


def decode_recall_handle(handle: str) -> tuple[int, str]:
    try:
        version, offset, message_id = base64.urlsafe_b64decode(handle.encode()).decode().split(" ")
        if version != "1":
            raise ValueError(version)
        return int(offset), message_id
    except (ValueError, UnicodeDecodeError, binascii.Error) as exc:
        raise MessagingError(Code.BAD_REQUEST, "recall handle is malformed") from exc


class DelayService:
    def __init__(self, log_: MessageLog, catalog: Catalog, clock: Clock) -> None:
        self._log = log_
        self._catalog = catalog
        self._clock = clock
        self._heap: list[tuple[int, int]] = []
        self._state: QueueState | None = None
        self._recalled: set[int] = set()

    def _progress(self) -> QueueState:
        if self._state is None:
            committed = self._log.offsets.query(SCHEDULE_PROGRESS_GROUP, SCHEDULE_TOPIC, 0)
            if committed < 0:
                committed = self._log.min_offset(SCHEDULE_TOPIC, 0)
            self._state = QueueState(committed)
        return self._state

    def scan(self) -> None:
        """Index schedule-queue entries written since the last scan."""
        st = self._progress()
        while True:
            res = self._log.get_messages(SCHEDULE_TOPIC, 0, st.next_new, SCAN_CHUNK)
            start = st.next_new
            for msg in res.messages:
                st.skip_to(msg.queue_offset)
                st.add(msg.queue_offset)
                raw = msg.properties.get(p.PROPERTY_TIMER_DELIVER_MS, "0")
                due = int(raw) if raw.isdigit() else 0
                heapq.heappush(self._heap, (due, msg.queue_offset))
            st.skip_to(res.next_offset)
            if st.next_new <= start:
                return

    def next_due(self) -> int | None:
        self.scan()
        return self._heap[0][0] if self._heap else None

    def pending(self) -> int:
        self.scan()
        return len(self._heap)

    async def schedule(self, rec: MessageRecord, due_ms: int) -> PutResult:
        self._catalog.system_topic(SCHEDULE_TOPIC, 1)
        props = dict(rec.properties)
        props[p.PROPERTY_REAL_TOPIC] = rec.topic
        props[p.PROPERTY_REAL_QUEUE_ID] = str(rec.queue_id)
        props[p.PROPERTY_TIMER_DELIVER_MS] = str(due_ms)
        parked = MessageRecord(
            topic=SCHEDULE_TOPIC, queue_id=0, body=rec.body, tags=rec.tags, keys=list(rec.keys),
            properties=props, born_timestamp=rec.born_timestamp, born_host=rec.born_host,
            flag=rec.flag,
        )
        return await self._log.put_message(parked)

    def recall(self, handle: str) -> str:
        offset, message_id = decode_recall_handle(handle)
        self.scan()
        st = self._progress()
        if offset in st.entries and offset not in self._recalled:
            self._recalled.add(offset)
            return message_id
        raise MessagingError(
            Code.NOT_FOUND, "the delayed message was already delivered, recalled or is unknown"
        )

    async def deliver_due(self) -> int:
        """Release every message due by now; returns how many were released."""
        self.scan()
        st = self._progress()
        now = self._clock.now_ms()
        released = 0
        while self._heap and self._heap[0][0] <= now:
            _, offset = heapq.heappop(self._heap)
            msg = None if offset in self._recalled else read_one(
                self._log, SCHEDULE_TOPIC, 0, offset)
            if msg is not None:
                result = await self._log.put_message(release_record(msg))
                if not result.status.stored:
                    log.warning("releasing delayed message at %d failed: %s", offset, result.status)
                    heapq.heappush(self._heap, (now + 1000, offset))
                    break
                released += 1
            self._recalled.discard(offset)
            st.done(offset)
        if self._log.offsets.query(SCHEDULE_PROGRESS_GROUP, SCHEDULE_TOPIC, 0) != st.committed:
            self._log.offsets.commit(SCHEDULE_PROGRESS_GROUP, SCHEDULE_TOPIC, 0, st.committed)
        return released
