"""DLedgerLeaderElector on a live node: the candidate maintain loop and the voter's side effects."""

from __future__ import annotations

import pytest

from mqcluster.raft.types import (
    HeartbeatRequest,
    Role,
    VoteParseResult,
    VoteRequest,
    VoteResponse,
    VoteResponseCode,
)
from tests.raft.helpers import CONFIG, elect, entries_with_terms, new_node, one, only, sent, take

Code = VoteResponseCode


def answer(
    node_id: str, to: VoteRequest, code: VoteResponseCode, term: int | None = None
) -> VoteResponse:
    return VoteResponse(
        src=node_id, dst=to.src, term=to.term if term is None else term, code=code,
        request_term=to.term, round=to.round,
    )  # fmt: skip


def test_nodes_start_as_candidates() -> None:
    node = new_node("a")
    assert node.role == Role.CANDIDATE
    assert node.leader_id is None


def test_first_round_campaigns_at_term_one_and_votes_for_itself() -> None:
    node = new_node("a")
    node.tick(0.0)
    rd = node.ready()
    assert node.term == 1
    assert rd.hard_state is not None and rd.hard_state.voted_for == "a"
    requests = only(rd.messages, VoteRequest)
    assert sorted(m.dst for m in requests) == ["b", "c"]
    assert all(m.term == 1 for m in requests)


@pytest.mark.parametrize(("voted_for", "campaign_term"), [("a", 5), ("b", 4), (None, 4)])
def test_restarted_member_campaigns_in_a_new_term_only_if_it_voted_for_itself(
    voted_for: str | None, campaign_term: int
) -> None:
    """Having voted for itself, it may have led that term with entries it wrote but had
    not fsync'd when it stopped: leading the term again could put another entry at the
    same index and term. Otherwise it revotes in its term, as DLedger does."""
    node = new_node("a", term=4, voted_for=voted_for)
    node.tick(0.0)
    node.tick(1.0)
    requests = only(take(node).messages, VoteRequest)
    assert requests and {r.term for r in requests} == {campaign_term}


def test_vote_request_carries_ledger_end_index_and_term() -> None:
    node = new_node("a", term=3, entries=entries_with_terms(1, 2, 3))
    node.tick(0.0)
    request = one(sent(node), VoteRequest, "b")
    assert (request.ledger_end_index, request.ledger_end_term) == (3, 3)


def test_candidate_waits_until_next_time_to_request_vote() -> None:
    node = new_node("a", term=2)
    node.tick(0.0)
    request = one(sent(node), VoteRequest, "b")
    # Both others voted for someone else: case 7, WAIT_TO_VOTE_NEXT.
    node.step(answer("b", request, Code.REJECT_ALREADY_VOTED), 0.0)
    node.step(answer("c", request, Code.REJECT_ALREADY_VOTED), 0.0)
    assert node.last_parse_result == VoteParseResult.WAIT_TO_VOTE_NEXT
    wake = node.next_time_to_request_vote
    assert CONFIG.min_vote_interval <= wake <= CONFIG.max_vote_interval
    sent(node)
    node.tick(wake - 0.001)
    assert sent(node) == []
    node.tick(wake)
    assert node.term == 3  # WAIT_TO_VOTE_NEXT increases the term for the next round
    assert one(sent(node), VoteRequest, "b").term == 3


def test_wait_to_revote_keeps_the_term() -> None:
    node = new_node("a", term=2)
    node.tick(0.0)
    sent(node)
    node.tick(10.0)  # round times out with only its own vote: case 3
    assert node.last_parse_result == VoteParseResult.WAIT_TO_REVOTE
    node.tick(node.next_time_to_request_vote)
    assert node.term == 2
    assert one(sent(node), VoteRequest, "b").term == 2


def test_already_has_leader_waits_an_extra_heartbeat_leak() -> None:
    node = new_node("a", term=2)
    node.tick(0.0)
    request = one(sent(node), VoteRequest, "b")
    node.step(answer("b", request, Code.REJECT_ALREADY_HAS_LEADER), 0.0)
    assert node.last_parse_result == VoteParseResult.WAIT_TO_REVOTE
    leak = CONFIG.max_heartbeat_leak * CONFIG.heartbeat_interval
    assert node.next_time_to_request_vote >= leak + CONFIG.min_vote_interval


def test_bigger_ledger_majority_waits_an_extra_vote_interval() -> None:
    node = new_node("a", term=2)
    node.tick(0.0)
    request = one(sent(node), VoteRequest, "b")
    node.step(answer("b", request, Code.REJECT_SMALL_LEDGER_END_INDEX), 0.0)
    node.step(answer("c", request, Code.REJECT_EXPIRED_LEDGER_TERM), 0.0)
    assert node.last_parse_result == VoteParseResult.WAIT_TO_REVOTE
    assert node.next_time_to_request_vote >= CONFIG.max_vote_interval + CONFIG.min_vote_interval


def test_bigger_term_in_answers_moves_next_round_to_that_term() -> None:
    node = new_node("a", term=2)
    node.tick(0.0)
    request = one(sent(node), VoteRequest, "b")
    node.step(answer("b", request, Code.REJECT_EXPIRED_VOTE_TERM, term=7), 0.0)
    node.step(answer("c", request, Code.ACCEPT), 0.0)
    assert node.last_parse_result == VoteParseResult.WAIT_TO_VOTE_NEXT
    node.tick(node.next_time_to_request_vote)
    assert node.term == 7


def test_revote_immediately_on_next_tick_with_the_same_term() -> None:
    node = new_node("a", term=2)
    node.tick(0.0)
    request = one(sent(node), VoteRequest, "b")
    node.step(answer("b", request, Code.REJECT_TERM_NOT_READY), 0.0)
    assert node.last_parse_result == VoteParseResult.REVOTE_IMMEDIATELY
    node.tick(0.01)
    again = one(sent(node), VoteRequest, "b")
    assert again.term == 2 and again.round > request.round


def test_passed_round_makes_the_candidate_leader() -> None:
    node = new_node("a", term=2)
    node.tick(0.0)
    request = one(sent(node), VoteRequest, "b")
    node.step(answer("b", request, Code.ACCEPT), 0.0)
    assert node.role == Role.LEADER
    assert node.leader_id == "a"


def test_vote_round_waits_for_the_round_timeout_without_answers() -> None:
    node = new_node("a", term=2)
    node.tick(0.0)
    sent(node)
    node.tick(0.49)
    assert node.last_parse_result != VoteParseResult.WAIT_TO_REVOTE or node.term == 2
    node.tick(CONFIG.vote_round_timeout + CONFIG.max_vote_interval)
    assert node.last_parse_result == VoteParseResult.WAIT_TO_REVOTE


def test_stale_round_answers_are_ignored() -> None:
    node = new_node("a", term=2)
    node.tick(0.0)
    first = one(sent(node), VoteRequest, "b")
    node.tick(10.0)  # round 1 times out
    node.tick(node.next_time_to_request_vote)
    sent(node)
    node.step(answer("b", first, Code.ACCEPT), 10.5)
    assert node.role == Role.CANDIDATE


def test_voter_with_smaller_term_becomes_candidate_and_adopts_term_on_next_tick() -> None:
    voter = new_node("b", term=2)
    voter.tick(0.0)
    sent(voter)
    voter.step(
        VoteRequest(src="a", dst="b", term=5, ledger_end_index=0, ledger_end_term=0, round=1), 0.0
    )
    response = one(sent(voter), VoteResponse, "a")
    assert response.code == Code.REJECT_TERM_NOT_READY
    assert voter.need_increase_term_immediately
    assert voter.term == 2
    voter.tick(0.001)
    assert voter.term == 5  # needIncreaseTermImmediately: adopt the known max term
    assert voter.voted_for is None
    assert not voter.need_increase_term_immediately
    assert only(sent(voter), VoteRequest) == []  # waits a random interval before campaigning
    voter.step(
        VoteRequest(src="a", dst="b", term=5, ledger_end_index=0, ledger_end_term=0, round=2), 0.0
    )
    assert one(sent(voter), VoteResponse, "a").code == Code.ACCEPT


def test_vote_is_persisted_in_the_same_ready_as_the_response() -> None:
    voter = new_node("b", term=3)
    voter.step(
        VoteRequest(src="a", dst="b", term=3, ledger_end_index=0, ledger_end_term=0, round=1), 0.0
    )
    rd = voter.ready()
    assert rd.hard_state is not None
    assert (rd.hard_state.term, rd.hard_state.voted_for) == (3, "a")
    assert one(rd.messages, VoteResponse, "a").code == Code.ACCEPT


def test_following_a_leader_counts_as_a_vote_for_it() -> None:
    voter = new_node("b", term=3)
    voter.step(HeartbeatRequest(src="a", dst="b", term=3), 0.0)
    rd = voter.ready()
    assert rd.hard_state is not None and rd.hard_state.voted_for == "a"
    voter.advance(rd)
    voter.step(VoteRequest(src="c", dst="b", term=3, ledger_end_index=0, ledger_end_term=0), 0.0)
    assert one(sent(voter), VoteResponse, "c").code == Code.REJECT_ALREADY_HAS_LEADER


def test_voter_grants_one_vote_per_term() -> None:
    voter = new_node("b", term=3)
    for candidate in ("a", "c"):
        voter.step(
            VoteRequest(src=candidate, dst="b", term=3, ledger_end_index=0, ledger_end_term=0),
            0.0,
        )
    codes = [m.code for m in only(sent(voter), VoteResponse)]
    assert codes == [Code.ACCEPT, Code.REJECT_ALREADY_VOTED]


def test_leader_steps_down_on_vote_request_with_bigger_term_and_as_new_log() -> None:
    nodes = {n: new_node(n) for n in "abc"}
    elect(nodes, "a")
    leader = nodes["a"]
    leader.step(
        VoteRequest(
            src="b", dst="a", term=leader.term + 1, ledger_end_index=leader.last_index,
            ledger_end_term=leader.last_term,
        ),
        1.0,
    )  # fmt: skip
    assert leader.role == Role.CANDIDATE
    assert one(sent(leader), VoteResponse, "b").code == Code.REJECT_TERM_NOT_READY


def test_stale_log_candidate_with_bigger_term_does_not_disturb_the_leader() -> None:
    nodes = {n: new_node(n) for n in "abc"}
    elect(nodes, "a")
    leader = nodes["a"]
    leader.step(
        VoteRequest(src="b", dst="a", term=leader.term + 5, ledger_end_index=0, ledger_end_term=0),
        1.0,
    )
    assert leader.role == Role.LEADER
    assert one(sent(leader), VoteResponse, "b").code == Code.REJECT_EXPIRED_LEDGER_TERM


def test_split_vote_resolves_with_randomized_intervals() -> None:
    nodes = {n: new_node(n, seed=i) for i, n in enumerate("abc")}
    now = 0.0
    messages = []
    for _ in range(400):
        for node in nodes.values():
            node.tick(now)
            messages.extend(sent(node))
        delivered, messages = messages, []
        for msg in delivered:
            nodes[msg.dst].step(msg, now)
            messages.extend(sent(nodes[msg.dst]))
        if any(n.role == Role.LEADER for n in nodes.values()):
            break
        now += 0.01
    leaders = [n for n in nodes.values() if n.role == Role.LEADER]
    assert len(leaders) == 1
    assert now < 2.0
