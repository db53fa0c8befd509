"""Builds the consume queues from the commitlog, behind the writer (``ReputMessageService``)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from mqcluster.store.codec import RecordKind, consumes_queue_offset
from mqcluster.store.commitlog import CommitLog
from mqcluster.store.consume_queue import ConsumeQueue
from mqcluster.store.consume_queue_store import ConsumeQueueStore
from mqcluster.store.scanner import scan

log = logging.getLogger(__name__)

ArrivalListener = Callable[[str, int, int], None]
Entry = tuple[int, int, int, int]


class Dispatcher:
    """``offset`` is the next commitlog offset to dispatch (a record boundary)."""

    def __init__(self, commitlog: CommitLog, queues: ConsumeQueueStore) -> None:
        self.commitlog = commitlog
        self.queues = queues
        self.offset = 0
        self.last_store_timestamp = 0
        self.listeners: list[ArrivalListener] = []
        self.stuck_reason = ""

    def dispatch(self, limit: int, budget_bytes: int = 1 << 62) -> int:
        """Dispatch complete records below ``limit``; returns the bytes consumed."""
        start = self.offset
        pending: dict[ConsumeQueue, list[Entry]] = {}
        pos = start
        for off, rec in scan(self.commitlog.files, pos, limit, verify_crc=False):
            if rec.kind is RecordKind.MESSAGE and rec.info is not None:
                info = rec.info
                if consumes_queue_offset(info.sys_flag):
                    cq = self.queues.find_or_create(info.topic, info.queue_id)
                    pending.setdefault(cq, []).append(
                        (info.queue_offset, off, rec.size, info.tags_code))
                self.last_store_timestamp = info.store_timestamp
                pos = off + rec.size
            elif rec.kind is RecordKind.BLANK:
                pos = off + rec.size
            else:
                if rec.kind is RecordKind.CORRUPT and self.stuck_reason != rec.reason:
                    self.stuck_reason = rec.reason
                    log.error("dispatch stopped at corrupt commitlog record %d: %s",
                              off, rec.reason)
                break
            if pos - start >= budget_bytes:
                break
        for cq, entries in pending.items():
            cq.put(entries)
        if pending:
            self.queues.register_new()
        self.offset = pos
        for cq in pending:
            for listener in self.listeners:
                try:
                    listener(cq.topic, cq.queue_id, cq.max_offset)
                except Exception:
                    log.exception("message arrival listener failed")
        return pos - start
