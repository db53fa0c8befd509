"""Retention: delete old commitlog segments by age and by disk usage (``CleanCommitLogService``).

Expired segments (newest message older than ``fileReservedTime`` hours) are deleted
during the ``deleteWhen`` hours, or at any hour once disk usage passes
``diskMaxUsedSpaceRatio``. Above ``diskSpaceCleanForciblyRatio`` the oldest segments
go even when not expired, until usage falls back. Above ``diskSpaceWarningLevelRatio``
the disk counts as full and writes are refused. The last segment is never deleted, nor
one holding data not yet flushed or dispatched.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass

from mqcluster.store.commitlog import CommitLog
from mqcluster.store.config import StoreConfig
from mqcluster.store.consume_queue_store import ConsumeQueueStore
from mqcluster.store.segment import Segment

log = logging.getLogger(__name__)

DELETE_FILES_BATCH_MAX = 10
DiskUsageFn = Callable[[str], float]


def disk_usage_ratio(path: str) -> float:
    usage = shutil.disk_usage(path)
    return usage.used / usage.total if usage.total else 1.0


def in_delete_window(delete_when: str, now_s: float) -> bool:
    hour = time.localtime(now_s).tm_hour
    return any(part.strip() and int(part) == hour for part in delete_when.split(";"))


@dataclass
class CleanResult:
    deleted_segments: int = 0
    deleted_cq_files: int = 0
    disk_usage: float = 0.0
    disk_full: bool = False


class Retention:
    def __init__(self, config: StoreConfig, commitlog: CommitLog, queues: ConsumeQueueStore,
                 clock: Callable[[], float], disk_usage: DiskUsageFn) -> None:
        self.config = config
        self.commitlog = commitlog
        self.queues = queues
        self.clock = clock
        self.disk_usage = disk_usage
        self.disk_full = False

    def run(self, safe_offset: int) -> CleanResult:
        """One round; segments must end at or below ``safe_offset`` to be deleted."""
        cfg = self.config
        now = self.clock()
        usage = self.disk_usage(cfg.commitlog_dir)
        result = CleanResult(disk_usage=usage)
        self.disk_full = usage > cfg.diskSpaceWarningLevelRatio / 100
        if self.disk_full:
            log.error("disk usage %.0f%% above the warning level; writes refused", usage * 100)
        space_to_delete = usage > cfg.diskMaxUsedSpaceRatio / 100
        forcibly = usage > cfg.diskSpaceCleanForciblyRatio / 100
        reserved_ms = cfg.fileReservedTime * 3600 * 1000
        now_ms = now * 1000

        def deletable(seg: Segment) -> bool:
            if seg.limit > safe_offset:
                return False
            newest = self._newest_timestamp(seg)
            expired = newest is not None and newest + reserved_ms <= now_ms
            return expired or forcibly

        if in_delete_window(cfg.deleteWhen, now) or space_to_delete:
            files = self.commitlog.files
            while result.deleted_segments < DELETE_FILES_BATCH_MAX:
                if files.delete_head(deletable, max_count=1) == 0:
                    break
                result.deleted_segments += 1
                if forcibly:
                    usage = self.disk_usage(cfg.commitlog_dir)
                    forcibly = usage > cfg.diskSpaceCleanForciblyRatio / 100
                    result.disk_usage = usage
                    self.disk_full = usage > cfg.diskSpaceWarningLevelRatio / 100
        if result.deleted_segments:
            log.info("retention deleted %d commitlog segment(s); min offset now %d",
                     result.deleted_segments, self.commitlog.min_offset)
        result.deleted_cq_files = self.queues.delete_expired(self.commitlog.min_offset)
        result.disk_full = self.disk_full
        return result

    def _newest_timestamp(self, seg: Segment) -> int | None:
        """Store time of the segment's newest message: that of the next segment's first."""
        nxt = self.commitlog.files.find(seg.limit)
        if nxt is not None and nxt.write_pos > 0:
            ts = self.commitlog.store_timestamp_at(nxt.start)
            if ts is not None:
                return ts
        return self.commitlog.last_store_timestamp or None
