"""Builds the consume queues from the commitlog, behind the writer (``ReputMessageService``)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from mqcluster.store.codec import RecordKind, consumes_queue_offset, dispatch_run
from mqcluster.store.commitlog import CommitLog, CqEntryOf, QueueRun
from mqcluster.store.consume_queue import ConsumeQueue
from mqcluster.store.consume_queue_store import ConsumeQueueStore
from mqcluster.store.scanner import CHUNK, scan

log = logging.getLogger(__name__)

ArrivalListener = Callable[[str, int, int], None]
Entry = tuple[int, int, int, int]
ONE_RECORD_READ = 64 * 1024
"""Bytes read for a record the fast walk left alone (``scan`` reads more if it is longer)."""


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
        """Dispatch complete records below ``limit``; returns the bytes consumed.

        Local appends are taken from the commitlog's record of them; everything else
        (replicated bytes, older history) is scanned from the segment files.
        """
        start = self.offset
        pending: dict[ConsumeQueue, list[Entry]] = {}
        pos = start
        cl = self.commitlog
        while pos < limit and pos - start < budget_bytes:
            head = cl.next_recent(pos)
            if head is not None and head.start == pos and head.end <= limit:
                cl.take_recent()
                for run in head.runs:
                    self._take_run(run, pending)
                if head.entries:
                    self._take(head.entries, pending)
                self.last_store_timestamp = head.store_timestamp
                pos = head.end
                continue
            scan_to = head.start if head is not None and pos < head.start < limit else limit
            pos, stopped = self._scan(pos, scan_to, start + budget_bytes, pending)
            if stopped:
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

    def _take(self, entries: list[CqEntryOf], pending: dict[ConsumeQueue, list[Entry]]) -> None:
        queues = self.queues
        last_key: tuple[str, int] | None = None
        bucket: list[Entry] = []
        for topic, queue_id, queue_offset, offset, size, code in entries:
            if (topic, queue_id) != last_key:
                last_key = (topic, queue_id)
                bucket = pending.setdefault(queues.find_or_create(topic, queue_id), [])
            bucket.append((queue_offset, offset, size, code))

    def _take_run(self, run: QueueRun, pending: dict[ConsumeQueue, list[Entry]]) -> None:
        cq = self.queues.find_or_create(run.topic, run.queue_id)
        first = run.first
        pending.setdefault(cq, []).extend(
            zip(range(first, first + len(run.offsets)), run.offsets, run.sizes, run.tags_codes,
                strict=True))

    def _scan(self, pos: int, limit: int, budget_end: int,
              pending: dict[ConsumeQueue, list[Entry]]) -> tuple[int, bool]:
        """Scan records in ``[pos, limit)``; ``(new position, True if it must stop here)``.

        Whole messages are read a chunk at a time by ``dispatch_run``; any other record
        (blank, end of data, a record cut by ``limit``, damage) goes through ``scan``."""
        files = self.commitlog.files
        max_size = files.segment_size
        queues = self.queues

        def bucket_for(topic: str, queue_id: int) -> list[Entry]:
            return pending.setdefault(queues.find_or_create(topic, queue_id), [])

        while pos < limit:
            seg = files.find(pos)
            if seg is not None and pos < min(seg.end, limit):
                buf = seg.read(pos - seg.start, min(min(seg.end, limit) - pos, CHUNK))
                stepped, store_ts = dispatch_run(buf, pos, max_size, bucket_for)
                if stepped:
                    pos += stepped
                    self.last_store_timestamp = store_ts
                    if pos >= budget_end:
                        return pos, True
                    continue
            pos, stop = self._scan_one(pos, limit, pending)
            if stop:
                return pos, True
            if pos >= budget_end:
                return pos, True
        return pos, False

    def _scan_one(self, pos: int, limit: int,
                  pending: dict[ConsumeQueue, list[Entry]]) -> tuple[int, bool]:
        """The one record at ``pos``: ``(position after it, True if it must stop here)``."""
        for off, rec in scan(self.commitlog.files, pos, limit, verify_crc=False,
                             chunk=ONE_RECORD_READ):
            if rec.kind is RecordKind.MESSAGE and rec.info is not None:
                info = rec.info
                if consumes_queue_offset(info.sys_flag):
                    cq = self.queues.find_or_create(info.topic, info.queue_id)
                    pending.setdefault(cq, []).append(
                        (info.queue_offset, off, rec.size, info.tags_code))
                self.last_store_timestamp = info.store_timestamp
                return off + rec.size, False
            if rec.kind is RecordKind.BLANK:
                return off + rec.size, False
            if rec.kind is RecordKind.CORRUPT and self.stuck_reason != rec.reason:
                self.stuck_reason = rec.reason
                log.error("dispatch stopped at corrupt commitlog record %d: %s", off, rec.reason)
            return pos, True
        return pos, True
