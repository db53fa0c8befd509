"""Reading a consume queue and the messages it points at (``DefaultMessageStore.getMessage``)."""

from __future__ import annotations

import logging
from collections.abc import Set as AbstractSet

from mqcluster.store.commitlog import CommitLog
from mqcluster.store.consume_queue import ConsumeQueue
from mqcluster.store.filter import MessageFilter, TagFilter
from mqcluster.store.message import GetResult, GetStatus, StoredMessage

log = logging.getLogger(__name__)

READ_BATCH = 256


def _code_filter(flt: MessageFilter | None) -> AbstractSet[int] | None:
    if isinstance(flt, TagFilter):
        return None if flt.matches_all else flt.codes
    if isinstance(flt, AbstractSet):
        return flt
    return None


def get_messages(commitlog: CommitLog, cq: ConsumeQueue | None, offset: int, max_count: int,
                 flt: MessageFilter | None, max_bytes: int, max_scan: int) -> GetResult:
    if cq is None or cq.max_offset == 0:
        return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, next_offset=0)
    lo, hi = cq.min_offset, cq.max_offset
    result = GetResult(GetStatus.NO_MATCHED_MESSAGE, min_offset=lo, max_offset=hi)
    if offset < lo:
        result.status, result.next_offset = GetStatus.OFFSET_TOO_SMALL, lo
        return result
    if offset == hi:
        result.status, result.next_offset = GetStatus.OFFSET_OVERFLOW_ONE, offset
        return result
    if offset > hi:
        result.status, result.next_offset = GetStatus.OFFSET_OVERFLOW_BADLY, hi
        return result
    codes = _code_filter(flt)
    predicate = None if isinstance(flt, AbstractSet) else flt
    cl_min = commitlog.min_offset
    next_offset = offset
    total = 0
    scanned = 0
    removed = False
    while next_offset < hi and len(result.messages) < max_count and scanned < max_scan:
        batch = cq.entries(next_offset, min(READ_BATCH, max_scan - scanned))
        if not batch:
            break
        stop = False
        for e in batch:
            if len(result.messages) >= max_count or (result.messages and total >= max_bytes):
                stop = True
                break
            scanned += 1
            if e.blank:
                next_offset = e.queue_offset + 1
                continue
            if e.commitlog_offset < cl_min:
                removed = True
                next_offset = e.queue_offset + 1
                continue
            if codes is not None and e.tags_code not in codes:
                next_offset = e.queue_offset + 1
                continue
            msg = commitlog.read_message(e.commitlog_offset, e.size)
            if msg is None:
                log.error("consume queue %s-%d offset %d points at no valid message (%d)",
                          cq.topic, cq.queue_id, e.queue_offset, e.commitlog_offset)
                if not result.messages:
                    result.status = GetStatus.OFFSET_FOUND_NULL
                    next_offset = e.queue_offset + 1
                stop = True
                break
            next_offset = e.queue_offset + 1
            if predicate is not None and not _matches(predicate, msg):
                continue
            result.messages.append(msg)
            total += msg.store_size
        if stop:
            break
    result.next_offset = next_offset
    if result.messages:
        result.status = GetStatus.FOUND
    elif removed and result.status is GetStatus.NO_MATCHED_MESSAGE:
        result.status = GetStatus.MESSAGE_WAS_REMOVING
    return result


def _matches(predicate: MessageFilter, msg: StoredMessage) -> bool:
    return bool(predicate(msg)) if callable(predicate) else True
