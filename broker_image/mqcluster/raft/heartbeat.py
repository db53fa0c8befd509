"""DLedger's heartbeat rules (DLedgerLeaderElector.handleHeartBeat and
sendHeartbeats): a follower's answer and the leader's verdict."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from mqcluster.raft.quorum import is_quorum
from mqcluster.raft.types import HeartbeatResponseCode


class HeartbeatAnswerAction(Enum):
    NONE = "NONE"
    REFRESH = "REFRESH"  # same leader: reset the heartbeat timer
    FOLLOW = "FOLLOW"  # no leader known in this term yet: follow the sender
    STEP_TO_CANDIDATE = "STEP_TO_CANDIDATE"  # sender's term is bigger: catch up first


@dataclass(slots=True, frozen=True)
class HeartbeatAnswer:
    code: HeartbeatResponseCode
    action: HeartbeatAnswerAction


def answer_heartbeat(
    *,
    self_id: str,
    voters: frozenset[str],
    term: int,
    leader_id: str | None,
    sender: str,
    sender_term: int,
    check_membership: bool = True,
) -> HeartbeatAnswer:
    """DLedgerLeaderElector.handleHeartBeat, in its order.

    Appends share these rules but skip the membership check: a follower whose
    configuration lags must still accept the log that brings it up to date.
    """
    action = HeartbeatAnswerAction
    if check_membership and sender not in voters:
        return HeartbeatAnswer(HeartbeatResponseCode.UNKNOWN_MEMBER, action.NONE)
    if sender == self_id:
        return HeartbeatAnswer(HeartbeatResponseCode.UNEXPECTED_MEMBER, action.NONE)
    if sender_term < term:
        return HeartbeatAnswer(HeartbeatResponseCode.EXPIRED_TERM, action.NONE)
    if sender_term > term:
        return HeartbeatAnswer(HeartbeatResponseCode.TERM_NOT_READY, action.STEP_TO_CANDIDATE)
    if leader_id == sender:
        return HeartbeatAnswer(HeartbeatResponseCode.SUCCESS, action.REFRESH)
    if leader_id is None:
        return HeartbeatAnswer(HeartbeatResponseCode.SUCCESS, action.FOLLOW)
    return HeartbeatAnswer(HeartbeatResponseCode.INCONSISTENT_LEADER, action.NONE)


class HeartbeatVerdict(Enum):
    SUCCEEDED = "SUCCEEDED"  # a majority answered SUCCESS
    RESEND_NOW = "RESEND_NOW"  # SUCCESS + TERM_NOT_READY is a majority: try again at once
    STEP_DOWN_BIGGER_TERM = "STEP_DOWN_BIGGER_TERM"
    STEP_DOWN_INCONSISTENT_LEADER = "STEP_DOWN_INCONSISTENT_LEADER"
    STEP_DOWN_LEAK = "STEP_DOWN_LEAK"  # no majority for max_heartbeat_leak intervals
    KEEP = "KEEP"


@dataclass(slots=True)
class HeartbeatTally:
    """Answers to one heartbeat round; the leader counts itself as a success."""

    term: int
    voter_count: int
    succ_num: int = 1
    not_ready_num: int = 0
    max_term: int = 0
    inconsistent_leader: bool = False
    answered: set[str] = field(default_factory=set)

    def record(self, follower: str, code: HeartbeatResponseCode, term: int) -> bool:
        if follower in self.answered:
            return False
        self.answered.add(follower)
        if code == HeartbeatResponseCode.SUCCESS:
            self.succ_num += 1
        elif code == HeartbeatResponseCode.EXPIRED_TERM:
            self.max_term = max(self.max_term, term)
        elif code == HeartbeatResponseCode.INCONSISTENT_LEADER:
            self.inconsistent_leader = True
        elif code == HeartbeatResponseCode.TERM_NOT_READY:
            self.not_ready_num += 1
        return True

    def can_decide_early(self) -> bool:
        return (
            is_quorum(self.succ_num, self.voter_count)
            or is_quorum(self.succ_num + self.not_ready_num, self.voter_count)
            or len(self.answered) + 1 >= self.voter_count
        )

    def verdict(self, *, silent_for: float, max_silence: float) -> HeartbeatVerdict:
        """``silent_for``: time since the last round a majority acknowledged."""
        if is_quorum(self.succ_num, self.voter_count):
            return HeartbeatVerdict.SUCCEEDED
        if is_quorum(self.succ_num + self.not_ready_num, self.voter_count):
            return HeartbeatVerdict.RESEND_NOW
        if self.max_term > self.term:
            return HeartbeatVerdict.STEP_DOWN_BIGGER_TERM
        if self.inconsistent_leader:
            return HeartbeatVerdict.STEP_DOWN_INCONSISTENT_LEADER
        if silent_for > max_silence:
            return HeartbeatVerdict.STEP_DOWN_LEAK
        return HeartbeatVerdict.KEEP
