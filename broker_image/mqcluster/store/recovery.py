"""Start-up recovery: make the commitlog, consume queues and queue offsets agree.

1. Consume queues: cut each after its last written entry.
2. Commitlog: scan from the segment holding the checkpointed offsets (all segments
   without a checkpoint), verify CRCs, cut after the last valid record; what the cut
   drops is counted and copied aside first (``damage``), never just zeroed.
3. Consume queues ahead of the commitlog lose the extra entries; queues behind (or
   missing, per the registry) are re-dispatched from the commitlog.
4. Queue offsets for new messages continue from the consume queues.
"""

from __future__ import annotations

import logging

from mqcluster.store.checkpoint import Checkpoint
from mqcluster.store.commitlog import CommitLog, RecoveryReport
from mqcluster.store.consume_queue_store import ConsumeQueueStore
from mqcluster.store.damage import DamageArchive
from mqcluster.store.dispatcher import Dispatcher

log = logging.getLogger(__name__)


def recover(commitlog: CommitLog, queues: ConsumeQueueStore, dispatcher: Dispatcher,
            checkpoint: Checkpoint | None, verify_crc: bool,
            archive: DamageArchive | None = None,
            dispatch_limit: int | None = None) -> RecoveryReport:
    """``dispatch_limit``: the consume queues get nothing past it (a DLedger commitlog,
    whose tail may hold entries not yet committed)."""
    commitlog.load()
    complete = queues.load()
    queues.recover()
    if checkpoint is None:
        scan_from, durable = commitlog.min_offset, 0
    else:
        scan_from = min(checkpoint.physic_offset, checkpoint.logics_offset)
        durable = checkpoint.physic_offset
    report = commitlog.recover(scan_from, verify_crc, durable, archive)
    queues.truncate_dirty(commitlog.max_offset)
    if checkpoint is None or not complete:
        dispatch_from = commitlog.min_offset
    else:
        dispatch_from = max(commitlog.min_offset,
                            min(checkpoint.logics_offset, commitlog.max_offset))
    dispatcher.offset = dispatch_from
    dispatcher.dispatch(commitlog.max_offset if dispatch_limit is None
                        else min(dispatch_limit, commitlog.max_offset))
    queues.correct_min_offsets(commitlog.min_offset)
    if not complete:
        queues.sync_registry()
    commitlog.reset_queue_offsets(queues.max_offsets(), dispatcher.offset)
    return report
