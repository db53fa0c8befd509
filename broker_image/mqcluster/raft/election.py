"""DLedger's vote rules (DLedgerLeaderElector): answering a vote request
(``handleVote``), and judging a round (``maintainAsCandidate``).

Both are pure functions of the numbers involved so each rule is testable alone;
the node applies the side effects (recording the vote, stepping to candidate).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mqcluster.raft.quorum import is_quorum
from mqcluster.raft.types import VoteParseResult, VoteResponseCode


@dataclass(slots=True, frozen=True)
class VoterState:
    """What a node knows when it answers a vote request."""

    self_id: str
    voters: frozenset[str]
    term: int
    voted_for: str | None
    leader_id: str | None
    ledger_end_index: int
    ledger_end_term: int
    taking_leadership: bool


@dataclass(slots=True, frozen=True)
class VoteAnswer:
    code: VoteResponseCode
    term: int  # carried in the response


def answer_vote(
    state: VoterState,
    candidate: str,
    term: int,
    ledger_end_index: int,
    ledger_end_term: int,
    *,
    is_self: bool,
) -> VoteAnswer:
    """DLedgerLeaderElector.handleVote, check by check, in its order.

    The log checks come before the term checks, so a candidate with a stale log
    never makes a voter change its term: it cannot disrupt a healthy group.
    """
    current = state.term
    if candidate not in state.voters:
        return VoteAnswer(VoteResponseCode.REJECT_UNKNOWN_LEADER, current)
    if not is_self and candidate == state.self_id:
        return VoteAnswer(VoteResponseCode.REJECT_UNEXPECTED_LEADER, current)
    if ledger_end_term < state.ledger_end_term:
        return VoteAnswer(VoteResponseCode.REJECT_EXPIRED_LEDGER_TERM, current)
    if ledger_end_term == state.ledger_end_term and ledger_end_index < state.ledger_end_index:
        return VoteAnswer(VoteResponseCode.REJECT_SMALL_LEDGER_END_INDEX, current)
    if term < current:
        return VoteAnswer(VoteResponseCode.REJECT_EXPIRED_VOTE_TERM, current)
    if term > current:
        # The voter first adopts the term in its own maintain loop, then votes.
        return VoteAnswer(VoteResponseCode.REJECT_TERM_NOT_READY, current)
    if state.voted_for is not None and state.voted_for != candidate:
        if state.leader_id is not None:
            return VoteAnswer(VoteResponseCode.REJECT_ALREADY_HAS_LEADER, current)
        return VoteAnswer(VoteResponseCode.REJECT_ALREADY_VOTED, current)
    if term < state.ledger_end_term:
        return VoteAnswer(VoteResponseCode.REJECT_TERM_SMALL_THAN_LEDGER, state.ledger_end_term)
    if (
        not is_self
        and state.taking_leadership
        and ledger_end_term == state.ledger_end_term
        and state.ledger_end_index >= ledger_end_index
    ):
        return VoteAnswer(VoteResponseCode.REJECT_TAKING_LEADERSHIP, current)
    return VoteAnswer(VoteResponseCode.ACCEPT, current)


@dataclass(slots=True)
class VoteTally:
    """The counters of one vote round (DLedgerLeaderElector.maintainAsCandidate)."""

    term: int
    voter_count: int
    valid_num: int = 0
    accepted_num: int = 0
    not_ready_term_num: int = 0
    bigger_ledger_num: int = 0
    already_has_leader: bool = False
    known_max_term_in_group: int = 0
    answered: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.known_max_term_in_group = max(self.known_max_term_in_group, self.term)

    def record(self, voter: str, code: VoteResponseCode, term: int) -> bool:
        """Count one answer; False if this voter already answered this round."""
        if voter in self.answered:
            return False
        self.answered.add(voter)
        # A voter that does not know the candidate gives no valid answer either: a
        # removed node then never reaches WAIT_TO_VOTE_NEXT and never inflates terms.
        if code not in (VoteResponseCode.UNKNOWN, VoteResponseCode.REJECT_UNKNOWN_LEADER):
            self.valid_num += 1
        if code == VoteResponseCode.ACCEPT:
            self.accepted_num += 1
        elif code == VoteResponseCode.REJECT_ALREADY_HAS_LEADER:
            self.already_has_leader = True
        elif code in (
            VoteResponseCode.REJECT_EXPIRED_VOTE_TERM,
            VoteResponseCode.REJECT_TERM_SMALL_THAN_LEDGER,
        ):
            self.known_max_term_in_group = max(self.known_max_term_in_group, term)
        elif code in (
            VoteResponseCode.REJECT_EXPIRED_LEDGER_TERM,
            VoteResponseCode.REJECT_SMALL_LEDGER_END_INDEX,
        ):
            self.bigger_ledger_num += 1
        elif code == VoteResponseCode.REJECT_TERM_NOT_READY:
            self.not_ready_term_num += 1
        return True

    def can_decide_early(self) -> bool:
        """DLedger's latch: stop waiting once the outcome cannot improve."""
        return (
            self.already_has_leader
            or is_quorum(self.accepted_num, self.voter_count)
            or is_quorum(self.accepted_num + self.not_ready_term_num, self.voter_count)
            or len(self.answered) >= self.voter_count
        )

    def parse(self) -> VoteOutcome:
        return parse_vote_round(
            term=self.term,
            voter_count=self.voter_count,
            valid_num=self.valid_num,
            accepted_num=self.accepted_num,
            not_ready_term_num=self.not_ready_term_num,
            bigger_ledger_num=self.bigger_ledger_num,
            already_has_leader=self.already_has_leader,
            known_max_term_in_group=self.known_max_term_in_group,
        )


@dataclass(slots=True, frozen=True)
class VoteOutcome:
    result: VoteParseResult
    case: int  # which of maintainAsCandidate's seven cases decided it
    extra_wait_heartbeats: bool = False  # case 2: wait out the other leader's heartbeat leak
    extra_wait_vote_interval: bool = False  # case 4: more nodes have a bigger ledger


def parse_vote_round(
    *,
    term: int,
    voter_count: int,
    valid_num: int,
    accepted_num: int,
    not_ready_term_num: int,
    bigger_ledger_num: int,
    already_has_leader: bool,
    known_max_term_in_group: int,
) -> VoteOutcome:
    """The seven cases of DLedgerLeaderElector.maintainAsCandidate, tested in its order."""
    if known_max_term_in_group > term:
        return VoteOutcome(VoteParseResult.WAIT_TO_VOTE_NEXT, 1)
    if already_has_leader:
        return VoteOutcome(VoteParseResult.WAIT_TO_REVOTE, 2, extra_wait_heartbeats=True)
    if not is_quorum(valid_num, voter_count):
        return VoteOutcome(VoteParseResult.WAIT_TO_REVOTE, 3)
    if not is_quorum(valid_num - bigger_ledger_num, voter_count):
        return VoteOutcome(VoteParseResult.WAIT_TO_REVOTE, 4, extra_wait_vote_interval=True)
    if is_quorum(accepted_num, voter_count):
        return VoteOutcome(VoteParseResult.PASSED, 5)
    if is_quorum(accepted_num + not_ready_term_num, voter_count):
        return VoteOutcome(VoteParseResult.REVOTE_IMMEDIATELY, 6)
    return VoteOutcome(VoteParseResult.WAIT_TO_VOTE_NEXT, 7)
