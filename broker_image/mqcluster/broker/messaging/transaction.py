"""Transactional messages: half messages, commit/rollback, and orphan check-backs.

A half message is stored in the half topic (invisible to consumers) with its real
topic and queue in properties. EndTransaction commits (the message is written to its
real topic) or rolls back; either way an op record in the op topic marks the half
message resolved, so a restart rebuilds the unresolved set from the two topics.
Unresolved half messages older than ``transactionTimeOut`` are offered for a
check-back every ``transactionCheckInterval``, and rolled back after
``transactionCheckMax`` checks.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from mqcluster.broker.messaging import properties as p
from mqcluster.broker.messaging.catalog import Catalog
from mqcluster.broker.messaging.clock import Clock
from mqcluster.broker.messaging.config import MessagingConfig
from mqcluster.broker.messaging.errors import Code, MessagingError
from mqcluster.broker.messaging.naming import (
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    TRANS_PROGRESS_GROUP,
)
from mqcluster.broker.messaging.queue_state import QueueState
from mqcluster.broker.messaging.records import message_id, release_record
from mqcluster.broker.messaging.store_port import MessageLog
from mqcluster.store.message import MessageRecord, PutResult, StoredMessage

log = logging.getLogger(__name__)

SCAN_CHUNK = 256
OP_REMOVE_TAG = "d"


@dataclass
class HalfMessage:
    offset: int
    transaction_id: str
    message_id: str
    topic: str
    commitlog_offset: int
    next_check_ms: int
    checks: int = 0


@dataclass(frozen=True)
class CheckRequest:
    """Ask a producer of ``topic`` whether the transaction of ``message`` committed."""

    topic: str
    transaction_id: str
    message: StoredMessage


class TransactionService:
    def __init__(self, log_: MessageLog, catalog: Catalog, clock: Clock,
                 config: MessagingConfig) -> None:
        self._log = log_
        self._catalog = catalog
        self._clock = clock
        self._config = config
        self._pending: dict[int, HalfMessage] = {}
        self._by_tid: dict[str, int] = {}
        self._resolved: set[int] = set()
        self._state: QueueState | None = None

    def load(self) -> None:
        """Rebuild the unresolved set: op records first, then the half queue."""
        offset = self._log.min_offset(TRANS_OP_HALF_TOPIC, 0)
        while True:
            res = self._log.get_messages(TRANS_OP_HALF_TOPIC, 0, offset, SCAN_CHUNK)
            for msg in res.messages:
                text = msg.body.decode(errors="replace")
                if text.isdigit():
                    self._resolved.add(int(text))
            if res.next_offset <= offset:
                break
            offset = res.next_offset
        self.scan()

    def _progress(self) -> QueueState:
        if self._state is None:
            committed = self._log.offsets.query(TRANS_PROGRESS_GROUP, TRANS_HALF_TOPIC, 0)
            if committed < 0:
                committed = self._log.min_offset(TRANS_HALF_TOPIC, 0)
            self._state = QueueState(committed)
        return self._state

    def scan(self) -> None:
        st = self._progress()
        while True:
            res = self._log.get_messages(TRANS_HALF_TOPIC, 0, st.next_new, SCAN_CHUNK)
            start = st.next_new
            for msg in res.messages:
                off = msg.queue_offset
                st.skip_to(off)
                st.add(off)
                if off in self._resolved:
                    self._resolved.discard(off)
                    st.done(off)
                elif off not in self._pending:
                    self._remember(off, msg.properties.get(p.PROPERTY_TRANSACTION_ID, ""),
                                   message_id(msg), msg.properties.get(p.PROPERTY_REAL_TOPIC, ""),
                                   msg.commitlog_offset, msg.store_timestamp)
            st.skip_to(res.next_offset)
            if st.next_new <= start:
                break
        self._commit()

    def _commit(self) -> None:
        st = self._progress()
        if self._log.offsets.query(TRANS_PROGRESS_GROUP, TRANS_HALF_TOPIC, 0) != st.committed:
            self._log.offsets.commit(TRANS_PROGRESS_GROUP, TRANS_HALF_TOPIC, 0, st.committed)

    def _remember(self, offset: int, tid: str, msg_id: str, topic: str, commitlog_offset: int,
                  stored_ms: int) -> None:
        self._pending[offset] = HalfMessage(offset, tid, msg_id, topic, commitlog_offset,
                                            stored_ms + self._config.transactionTimeOut)
        if tid:
            self._by_tid[tid] = offset

    def unresolved(self) -> list[HalfMessage]:
        return sorted(self._pending.values(), key=lambda h: h.offset)

    async def prepare(self, rec: MessageRecord) -> tuple[PutResult, str]:
        """Store ``rec`` as a half message; returns the put result and the transaction id."""
        self._catalog.system_topic(TRANS_HALF_TOPIC, 1)
        tid = uuid.uuid4().hex.upper()
        props = dict(rec.properties)
        props[p.PROPERTY_REAL_TOPIC] = rec.topic
        props[p.PROPERTY_REAL_QUEUE_ID] = str(rec.queue_id)
        props[p.PROPERTY_TRANSACTION_PREPARED] = "true"
        props[p.PROPERTY_TRANSACTION_ID] = tid
        half = MessageRecord(
            topic=TRANS_HALF_TOPIC, queue_id=0, body=rec.body, tags=rec.tags, keys=list(rec.keys),
            properties=props, born_timestamp=rec.born_timestamp, born_host=rec.born_host,
            flag=rec.flag,
        )
        result = await self._log.put_message(half)
        if result.status.stored:
            self._remember(result.queue_offset, tid, props.get(p.PROPERTY_UNIQ_KEY, ""),
                           rec.topic, result.commitlog_offset, self._clock.now_ms())
        return result, tid

    async def end(self, transaction_id: str, msg_id: str, commit: bool) -> None:
        offset = self._by_tid.get(transaction_id)
        if offset is None:
            self.scan()
            offset = self._by_tid.get(transaction_id)
        half = self._pending.get(offset) if offset is not None else None
        if half is None:
            raise MessagingError(
                Code.INVALID_TRANSACTION_ID,
                f"transaction {transaction_id!r} is unknown or already ended",
            )
        if msg_id and half.message_id and msg_id != half.message_id:
            raise MessagingError(
                Code.INVALID_TRANSACTION_ID,
                f"transaction {transaction_id!r} belongs to message {half.message_id!r}",
            )
        if commit:
            msg = self._log.get_message_by_offset(half.commitlog_offset)
            if msg is None:
                raise MessagingError(Code.INTERNAL_SERVER_ERROR,
                                     "the half message is not readable yet; retry")
            result = await self._log.put_message(release_record(msg, drop=(
                p.PROPERTY_TRANSACTION_PREPARED, p.PROPERTY_TRANSACTION_ID)))
            if not result.status.stored:
                raise MessagingError(Code.INTERNAL_SERVER_ERROR,
                                     f"committing the transaction failed: {result.status.value}")
        await self._resolve(half)

    async def _resolve(self, half: HalfMessage) -> None:
        self._catalog.system_topic(TRANS_OP_HALF_TOPIC, 1)
        await self._log.put_message(MessageRecord(
            topic=TRANS_OP_HALF_TOPIC, queue_id=0, body=str(half.offset).encode(),
            tags=OP_REMOVE_TAG,
        ))
        self._pending.pop(half.offset, None)
        self._by_tid.pop(half.transaction_id, None)
        st = self._progress()
        if half.offset in st.entries:
            st.done(half.offset)
        else:
            self._resolved.add(half.offset)
        self._commit()

    async def due_checks(self) -> list[CheckRequest]:
        """Half messages to check back now; rolls back those out of checks."""
        self.scan()
        now = self._clock.now_ms()
        out: list[CheckRequest] = []
        for half in self.unresolved():
            if half.next_check_ms > now:
                continue
            if half.checks >= self._config.transactionCheckMax:
                log.info("transaction %s unresolved after %d checks: rolled back",
                         half.transaction_id, half.checks)
                await self._resolve(half)
                continue
            msg = self._log.get_message_by_offset(half.commitlog_offset)
            if msg is None:
                continue
            half.checks += 1
            half.next_check_ms = now + self._config.transactionCheckInterval
            out.append(CheckRequest(half.topic, half.transaction_id, msg))
        return out
