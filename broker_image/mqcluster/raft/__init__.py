"""Sans-I/O DLedger Raft: a pure state machine driven by ``tick``/``step``, plus storage.

``RaftNode`` (core.py) is the state machine; ``types.py`` holds the messages,
``Ready`` and ``RaftConfig``. The rules live in small modules: election.py (vote
answers and round outcomes), heartbeat.py, progress.py (per-follower window),
memory_log.py (the in-memory log), disk_log.py (the log on disk), membership.py, quorum.py.
"""

from mqcluster.raft.core import RaftNode
from mqcluster.raft.types import (
    Entry,
    EntryType,
    HardState,
    Membership,
    Message,
    NotLeaderError,
    RaftConfig,
    Ready,
    Role,
    Snapshot,
    SnapshotMeta,
    TransferInProgressError,
)

__all__ = [
    "Entry",
    "EntryType",
    "HardState",
    "Membership",
    "Message",
    "NotLeaderError",
    "RaftConfig",
    "RaftNode",
    "Ready",
    "Role",
    "Snapshot",
    "SnapshotMeta",
    "TransferInProgressError",
]
