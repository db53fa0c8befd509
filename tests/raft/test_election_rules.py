"""DLedgerLeaderElector: how a voter answers a vote request, how a candidate judges its round."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mqcluster.raft.election import (
    VoterState,
    VoteTally,
    answer_vote,
    parse_vote_round,
)
from mqcluster.raft.types import VoteParseResult, VoteResponseCode

Code = VoteResponseCode
VOTER = VoterState(
    self_id="b",
    voters=frozenset({"a", "b", "c"}),
    term=5,
    voted_for=None,
    leader_id=None,
    ledger_end_index=10,
    ledger_end_term=4,
    taking_leadership=False,
)


def vote(
    state: VoterState = VOTER,
    candidate: str = "a",
    term: int = 5,
    ledger_end_index: int = 10,
    ledger_end_term: int = 4,
    *,
    is_self: bool = False,
) -> VoteResponseCode:
    return answer_vote(
        state, candidate, term, ledger_end_index, ledger_end_term, is_self=is_self
    ).code


def test_vote_accepted_when_term_equal_ledger_as_new_and_not_voted() -> None:
    assert vote() == Code.ACCEPT


def test_vote_accepted_again_for_the_candidate_already_voted_for() -> None:
    assert vote(replace(VOTER, voted_for="a")) == Code.ACCEPT


def test_vote_rejected_when_candidate_is_not_a_member() -> None:
    assert vote(candidate="x") == Code.REJECT_UNKNOWN_LEADER


def test_vote_rejected_when_remote_candidate_claims_the_voters_own_id() -> None:
    assert vote(candidate="b") == Code.REJECT_UNEXPECTED_LEADER
    assert vote(candidate="b", is_self=True) == Code.ACCEPT


def test_vote_rejected_when_candidate_ledger_end_term_smaller() -> None:
    assert vote(ledger_end_term=3, ledger_end_index=99) == Code.REJECT_EXPIRED_LEDGER_TERM


def test_vote_rejected_when_candidate_ledger_end_index_smaller() -> None:
    assert vote(ledger_end_index=9) == Code.REJECT_SMALL_LEDGER_END_INDEX


def test_ledger_checks_come_before_term_checks() -> None:
    # A stale log with a bigger term must not push the voter to a new term.
    assert vote(term=9, ledger_end_index=9) == Code.REJECT_SMALL_LEDGER_END_INDEX


def test_vote_rejected_when_candidate_term_smaller() -> None:
    answer = answer_vote(VOTER, "a", 4, 10, 4, is_self=False)
    assert answer.code == Code.REJECT_EXPIRED_VOTE_TERM
    assert answer.term == 5  # tells the candidate the bigger term


def test_vote_term_not_ready_when_candidate_term_bigger() -> None:
    assert vote(term=6) == Code.REJECT_TERM_NOT_READY


def test_vote_rejected_when_already_voted_for_another_and_no_leader() -> None:
    assert vote(replace(VOTER, voted_for="c")) == Code.REJECT_ALREADY_VOTED


def test_vote_rejected_when_already_voted_and_leader_known() -> None:
    state = replace(VOTER, voted_for="c", leader_id="c")
    assert vote(state) == Code.REJECT_ALREADY_HAS_LEADER


def test_vote_rejected_when_request_term_smaller_than_voter_ledger_term() -> None:
    state = replace(VOTER, term=3, ledger_end_term=4)
    answer = answer_vote(state, "a", 3, 10, 4, is_self=False)
    assert answer.code == Code.REJECT_TERM_SMALL_THAN_LEDGER
    assert answer.term == 4


def test_vote_rejected_while_voter_takes_leadership_with_log_as_new() -> None:
    state = replace(VOTER, taking_leadership=True)
    assert vote(state) == Code.REJECT_TAKING_LEADERSHIP
    # A candidate with a longer log still wins the vote of a transferee.
    assert vote(state, ledger_end_index=11) == Code.ACCEPT
    # The transferee's own vote is never refused for this reason.
    assert vote(state, candidate="b", is_self=True) == Code.ACCEPT


# --- the seven cases of a vote round ---------------------------------------------------


def outcome(**counts: int | bool) -> tuple[VoteParseResult, int]:
    args: dict[str, int | bool] = {
        "term": 5,
        "voter_count": 5,
        "valid_num": 5,
        "accepted_num": 0,
        "not_ready_term_num": 0,
        "bigger_ledger_num": 0,
        "already_has_leader": False,
        "known_max_term_in_group": 5,
    }
    args.update(counts)
    result = parse_vote_round(**args)  # type: ignore[arg-type]
    return result.result, result.case


def test_round_case1_bigger_known_term_waits_to_vote_next() -> None:
    assert outcome(known_max_term_in_group=6, accepted_num=5) == (
        VoteParseResult.WAIT_TO_VOTE_NEXT,
        1,
    )


def test_round_case2_already_has_leader_waits_to_revote() -> None:
    result = parse_vote_round(
        term=5, voter_count=5, valid_num=5, accepted_num=3, not_ready_term_num=0,
        bigger_ledger_num=0, already_has_leader=True, known_max_term_in_group=5,
    )  # fmt: skip
    assert (result.result, result.case) == (VoteParseResult.WAIT_TO_REVOTE, 2)
    assert result.extra_wait_heartbeats


def test_round_case3_valid_answers_not_a_majority_waits_to_revote() -> None:
    assert outcome(valid_num=2, accepted_num=2) == (VoteParseResult.WAIT_TO_REVOTE, 3)


def test_round_case4_too_many_bigger_ledgers_waits_longer() -> None:
    # 10 nodes, 7 valid answers, 3 with a bigger ledger.
    result = parse_vote_round(
        term=5, voter_count=10, valid_num=7, accepted_num=4, not_ready_term_num=0,
        bigger_ledger_num=3, already_has_leader=False, known_max_term_in_group=5,
    )  # fmt: skip
    assert (result.result, result.case) == (VoteParseResult.WAIT_TO_REVOTE, 4)
    assert result.extra_wait_vote_interval


def test_round_case4_not_hit_with_few_bigger_ledgers() -> None:
    assert outcome(voter_count=10, valid_num=7, bigger_ledger_num=1, accepted_num=6) == (
        VoteParseResult.PASSED,
        5,
    )


def test_round_case5_accepted_majority_passes() -> None:
    assert outcome(accepted_num=3, bigger_ledger_num=1) == (VoteParseResult.PASSED, 5)


def test_round_case6_accepted_plus_not_ready_majority_revotes_immediately() -> None:
    assert outcome(accepted_num=1, not_ready_term_num=2) == (
        VoteParseResult.REVOTE_IMMEDIATELY,
        6,
    )


def test_round_case7_otherwise_waits_to_vote_next() -> None:
    assert outcome(accepted_num=2) == (VoteParseResult.WAIT_TO_VOTE_NEXT, 7)


@pytest.mark.parametrize(
    ("code", "field", "value"),
    [
        (Code.ACCEPT, "accepted_num", 1),
        (Code.REJECT_SMALL_LEDGER_END_INDEX, "bigger_ledger_num", 1),
        (Code.REJECT_EXPIRED_LEDGER_TERM, "bigger_ledger_num", 1),
        (Code.REJECT_TERM_NOT_READY, "not_ready_term_num", 1),
        (Code.REJECT_ALREADY_HAS_LEADER, "already_has_leader", True),
        (Code.REJECT_EXPIRED_VOTE_TERM, "known_max_term_in_group", 9),
        (Code.REJECT_TERM_SMALL_THAN_LEDGER, "known_max_term_in_group", 9),
    ],
)
def test_tally_counts_each_response_code(code: VoteResponseCode, field: str, value: object) -> None:
    tally = VoteTally(term=5, voter_count=3)
    assert tally.record("a", code, 9)
    assert getattr(tally, field) == value
    assert tally.valid_num == 1


def test_tally_does_not_count_an_answer_from_a_voter_that_does_not_know_the_candidate() -> None:
    tally = VoteTally(term=5, voter_count=3)
    tally.record("a", Code.REJECT_UNKNOWN_LEADER, 5)
    tally.record("b", Code.REJECT_UNKNOWN_LEADER, 5)
    tally.record("c", Code.ACCEPT, 5)
    assert tally.valid_num == 1
    assert tally.parse().result == VoteParseResult.WAIT_TO_REVOTE  # no bigger term next time


def test_tally_ignores_a_duplicated_answer() -> None:
    tally = VoteTally(term=5, voter_count=3)
    assert tally.record("a", Code.ACCEPT, 5)
    assert not tally.record("a", Code.ACCEPT, 5)
    assert tally.accepted_num == 1


def test_tally_already_voted_and_taking_leadership_count_only_as_valid() -> None:
    tally = VoteTally(term=5, voter_count=3)
    tally.record("a", Code.REJECT_ALREADY_VOTED, 5)
    tally.record("b", Code.REJECT_TAKING_LEADERSHIP, 5)
    assert (tally.valid_num, tally.accepted_num, tally.bigger_ledger_num) == (2, 0, 0)


def test_tally_decides_early_on_quorum_leader_or_all_answers() -> None:
    tally = VoteTally(term=5, voter_count=3)
    tally.record("a", Code.ACCEPT, 5)
    assert not tally.can_decide_early()
    tally.record("b", Code.REJECT_TERM_NOT_READY, 5)
    assert tally.can_decide_early()
    leader_known = VoteTally(term=5, voter_count=5)
    leader_known.record("c", Code.REJECT_ALREADY_HAS_LEADER, 5)
    assert leader_known.can_decide_early()
