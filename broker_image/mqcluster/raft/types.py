"""Public data types of the sans-I/O DLedger Raft core.

Plain slotted dataclasses with JSON-friendly fields (ints, strs, bytes, lists,
int enums) so the wire codec and the disk log can serialize them directly.
Times are seconds as ``float``; indexes start at 1 (0 means "nothing").
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from enum import Enum, IntEnum

__all__ = [
    "AppendRequest",
    "AppendResponse",
    "AppendResponseCode",
    "Entry",
    "EntryType",
    "HardState",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "HeartbeatResponseCode",
    "InstallSnapshotRequest",
    "InstallSnapshotResponse",
    "InstallSnapshotResponseCode",
    "Membership",
    "Message",
    "NotLeaderError",
    "RaftConfig",
    "Ready",
    "Role",
    "Snapshot",
    "SnapshotMeta",
    "StoredEntries",
    "TimeoutNowRequest",
    "TransferInProgressError",
    "VoteParseResult",
    "VoteRequest",
    "VoteResponse",
    "VoteResponseCode",
]


@dataclass
class StoredEntries:
    """What a log holds from ``first_index`` on, without the entries' data: each
    entry's term, type and data size (the data is read when needed)."""

    first_index: int
    terms: array[int]
    types: array[int]
    sizes: array[int]


class EntryType(IntEnum):
    NORMAL = 0
    NOOP = 1  # appended by a new leader so entries of older terms can commit
    CONFIG = 2  # data is a Membership encoded by mqcluster.raft.membership


@dataclass(slots=True)
class Entry:
    index: int
    term: int
    type: EntryType
    data: bytes


@dataclass(slots=True)
class HardState:
    """What must be fsync'd before any message that depends on it is sent."""

    term: int
    voted_for: str | None


@dataclass(slots=True)
class Membership:
    """Voters elect and commit; learners only receive the log."""

    voters: list[str]
    learners: list[str] = field(default_factory=list)


@dataclass(slots=True)
class SnapshotMeta:
    index: int
    term: int
    membership: Membership


@dataclass(slots=True)
class Snapshot:
    meta: SnapshotMeta
    data: bytes


class Role(Enum):
    CANDIDATE = "CANDIDATE"
    FOLLOWER = "FOLLOWER"
    LEADER = "LEADER"
    LEARNER = "LEARNER"  # not a voter of the group it knows: never campaigns


# --- response codes, as DLedger names them (VoteResponse.RESULT, ...) ------------------


class VoteResponseCode(IntEnum):
    UNKNOWN = 0  # no answer (never sent; used by tests and traces)
    ACCEPT = 1
    REJECT_UNKNOWN_LEADER = 2  # candidate is not a voter of this node's group
    REJECT_UNEXPECTED_LEADER = 3  # candidate claims this node's own id
    REJECT_EXPIRED_VOTE_TERM = 4  # candidate's term < this node's term
    REJECT_ALREADY_VOTED = 5
    REJECT_ALREADY_HAS_LEADER = 6
    REJECT_TERM_NOT_READY = 7  # candidate's term > this node's: it catches up first
    REJECT_TERM_SMALL_THAN_LEDGER = 8
    REJECT_EXPIRED_LEDGER_TERM = 9
    REJECT_SMALL_LEDGER_END_INDEX = 10
    REJECT_TAKING_LEADERSHIP = 11


class VoteParseResult(IntEnum):
    """Outcome of one vote round (DLedger's VoteResponse.ParseResult; the seven cases of
    maintainAsCandidate map onto these four)."""

    WAIT_TO_REVOTE = 0  # same term next time
    REVOTE_IMMEDIATELY = 1  # same term, on the next tick
    PASSED = 2  # became leader
    WAIT_TO_VOTE_NEXT = 3  # next round uses a bigger term


class HeartbeatResponseCode(IntEnum):
    SUCCESS = 0
    EXPIRED_TERM = 1
    INCONSISTENT_LEADER = 2
    TERM_NOT_READY = 3
    UNKNOWN_MEMBER = 4
    UNEXPECTED_MEMBER = 5


class AppendResponseCode(IntEnum):
    SUCCESS = 0
    EXPIRED_TERM = 1
    INCONSISTENT_LEADER = 2
    TERM_NOT_READY = 3
    UNKNOWN_MEMBER = 4
    UNEXPECTED_MEMBER = 5
    INCONSISTENT_STATE = 6  # prev entry missing or of another term: skip back


class InstallSnapshotResponseCode(IntEnum):
    SUCCESS = 0
    EXPIRED_TERM = 1
    INCONSISTENT_LEADER = 2
    TERM_NOT_READY = 3
    UNKNOWN_MEMBER = 4
    UNEXPECTED_MEMBER = 5


# --- messages -------------------------------------------------------------------------


@dataclass(slots=True)
class VoteRequest:
    src: str  # the candidate (DLedger's leaderId of a vote request)
    dst: str
    term: int
    ledger_end_index: int
    ledger_end_term: int
    round: int = 0  # candidate's vote-round number, echoed so stale answers are dropped


@dataclass(slots=True)
class VoteResponse:
    src: str
    dst: str
    term: int  # the voter's term (its ledger end term for REJECT_TERM_SMALL_THAN_LEDGER)
    code: VoteResponseCode
    request_term: int = 0
    round: int = 0


@dataclass(slots=True)
class HeartbeatRequest:
    src: str  # the leader
    dst: str
    term: int
    commit_index: int = 0
    round: int = 0


@dataclass(slots=True)
class HeartbeatResponse:
    src: str
    dst: str
    term: int
    code: HeartbeatResponseCode
    round: int = 0
    last_index: int = 0  # lets the leader notice a follower that fell behind


@dataclass(slots=True)
class AppendRequest:
    """A batch push; several may be in flight per follower (the pipeline window)."""

    src: str
    dst: str
    term: int
    prev_index: int
    prev_term: int
    entries: list[Entry]
    commit_index: int
    seq: int = 0  # per-leader sequence number of the push


@dataclass(slots=True)
class AppendResponse:
    src: str
    dst: str
    term: int
    code: AppendResponseCode
    prev_index: int = 0  # echoed from the request
    match_index: int = 0  # on SUCCESS: last index known to equal the leader's log
    last_index: int = 0  # follower's last log index, for the fast skip-back
    seq: int = 0


@dataclass(slots=True)
class InstallSnapshotRequest:
    src: str
    dst: str
    term: int
    snapshot: Snapshot


@dataclass(slots=True)
class InstallSnapshotResponse:
    src: str
    dst: str
    term: int
    code: InstallSnapshotResponseCode
    last_index: int = 0


@dataclass(slots=True)
class TimeoutNowRequest:
    """Leadership transfer: the caught-up transferee campaigns at ``term + 1`` at once."""

    src: str
    dst: str
    term: int


Message = (
    VoteRequest
    | VoteResponse
    | HeartbeatRequest
    | HeartbeatResponse
    | AppendRequest
    | AppendResponse
    | InstallSnapshotRequest
    | InstallSnapshotResponse
    | TimeoutNowRequest
)


# --- driving the core -----------------------------------------------------------------


@dataclass(slots=True)
class Ready:
    """Work for the caller, to be done in this order, then ``advance(ready)``.

    1. ``hard_state``: persist (fsync) if not None.
    2. ``snapshot``: persist it, restore the state machine from it and drop every
       persisted entry with index <= ``snapshot.meta.index``.
    3. ``truncate_from``: drop persisted entries with index >= this.
    4. ``entries``: append, then fsync.
    5. ``messages``: send.
    6. ``committed``: apply to the state machine, in order.
    ``compacted_to``: the core dropped its log prefix up to this index after
    ``compact()``; storage may drop persisted entries <= it (optional, lazy).
    """

    hard_state: HardState | None
    truncate_from: int | None
    entries: list[Entry]
    snapshot: Snapshot | None
    messages: list[Message]
    committed: list[Entry]
    role: Role
    leader_id: str | None
    term: int
    commit_index: int
    compacted_to: int | None = None


@dataclass(slots=True)
class RaftConfig:
    """Timings in seconds. Defaults: a new leader well under 1 s after a leader dies."""

    heartbeat_interval: float = 0.1
    max_heartbeat_leak: int = 3  # follower campaigns after leak x interval of silence
    min_vote_interval: float = 0.03  # randomized wait before the next vote round
    max_vote_interval: float = 0.1
    vote_round_timeout: float = 0.05  # DLedger waits 2 s + rand(max_vote_interval)
    min_take_leadership_vote_interval: float = 0.0
    max_take_leadership_vote_interval: float = 0.03
    max_inflight_appends: int = 8  # pipeline window per follower
    max_batch_entries: int = 64
    max_batch_bytes: int = 1 << 20
    max_committed_bytes: int = 64 << 20  # committed entry data handed out per Ready
    append_retry_timeout: float = 0.3  # unacked pushes are re-sent after this
    preferred_leader_ids: list[str] = field(default_factory=list)
    preferred_leader_check_interval: float = 1.0
    max_transfer_gap: int = 1000  # preferred leader must be this close to start a transfer
    transfer_timeout: float = 1.0  # transferee must catch up and win within this
    learner_catch_up_gap: int = 0  # promote_learner needs the learner this close


class NotLeaderError(Exception):
    """Raised by propose* and membership changes on a node that is not the leader."""

    def __init__(self, leader_id: str | None) -> None:
        super().__init__(f"not the leader; leader is {leader_id!r}")
        self.leader_id = leader_id


class TransferInProgressError(NotLeaderError):
    """The leader refuses writes while it hands leadership to ``leader_id``."""

    def __init__(self, leader_id: str | None) -> None:
        Exception.__init__(self, f"leadership transfer to {leader_id!r} in progress")
        self.leader_id = leader_id
