"""DLedgerLeaderElector's heartbeat rules: the follower's answer codes and the leader's verdicts."""

from __future__ import annotations

from mqcluster.raft.heartbeat import HeartbeatTally, HeartbeatVerdict
from mqcluster.raft.types import (
    AppendRequest,
    AppendResponse,
    AppendResponseCode,
    HeartbeatRequest,
    HeartbeatResponse,
    HeartbeatResponseCode,
    Role,
    VoteRequest,
)
from tests.raft.helpers import CONFIG, elect, new_node, one, only, sent

Code = HeartbeatResponseCode
LEAK = CONFIG.max_heartbeat_leak * CONFIG.heartbeat_interval


def beat(node_id: str, src: str, sender_term: int, *, term: int) -> HeartbeatResponse:
    node = new_node(node_id, term=term)
    node.step(HeartbeatRequest(src=src, dst=node_id, term=sender_term, round=1), 0.0)
    return one(sent(node), HeartbeatResponse, src)


def test_heartbeat_from_unknown_member_is_rejected() -> None:
    assert beat("b", "x", 1, term=1).code == Code.UNKNOWN_MEMBER


def test_heartbeat_claiming_the_receivers_id_is_unexpected_member() -> None:
    assert beat("b", "b", 1, term=1).code == Code.UNEXPECTED_MEMBER


def test_heartbeat_with_smaller_term_is_expired_term() -> None:
    response = beat("b", "a", 1, term=2)
    assert response.code == Code.EXPIRED_TERM
    assert response.term == 2


def test_heartbeat_in_term_without_leader_makes_receiver_follow() -> None:
    node = new_node("b", term=2)
    node.step(HeartbeatRequest(src="a", dst="b", term=2), 0.0)
    assert one(sent(node), HeartbeatResponse, "a").code == Code.SUCCESS
    assert (node.role, node.leader_id) == (Role.FOLLOWER, "a")


def test_heartbeat_from_another_leader_in_same_term_is_inconsistent_leader() -> None:
    node = new_node("b", term=2)
    node.step(HeartbeatRequest(src="a", dst="b", term=2), 0.0)
    sent(node)
    node.step(HeartbeatRequest(src="c", dst="b", term=2), 0.0)
    assert one(sent(node), HeartbeatResponse, "c").code == Code.INCONSISTENT_LEADER
    assert node.leader_id == "a"


def test_heartbeat_with_bigger_term_is_term_not_ready_and_receiver_catches_up() -> None:
    node = new_node("b", term=2)
    node.step(HeartbeatRequest(src="a", dst="b", term=4), 0.0)
    assert one(sent(node), HeartbeatResponse, "a").code == Code.TERM_NOT_READY
    assert node.role == Role.CANDIDATE
    assert node.need_increase_term_immediately
    node.tick(0.01)
    assert node.term == 4
    node.step(HeartbeatRequest(src="a", dst="b", term=4), 0.02)
    assert one(sent(node), HeartbeatResponse, "a").code == Code.SUCCESS
    assert node.leader_id == "a"


def test_follower_becomes_candidate_after_heartbeat_leak() -> None:
    node = new_node("b", term=2)
    node.step(HeartbeatRequest(src="a", dst="b", term=2), 0.0)
    sent(node)
    node.tick(LEAK)
    assert node.role == Role.FOLLOWER
    node.step(HeartbeatRequest(src="a", dst="b", term=2), LEAK)
    node.tick(2 * LEAK)
    assert node.role == Role.FOLLOWER
    node.tick(2 * LEAK + 0.01)
    assert node.role.name == "CANDIDATE"
    assert node.term == 2  # DLedger campaigns at the current term first


def test_a_follower_whose_leader_is_gone_campaigns_without_waiting_for_the_leak() -> None:
    node = new_node("b", term=2)
    node.step(HeartbeatRequest(src="a", dst="b", term=2), 0.0)
    sent(node)
    node.leader_unreachable("c", 0.01)  # not its leader
    assert (node.role, node.leader_id) == (Role.FOLLOWER, "a")
    node.leader_unreachable("a", 0.01)
    assert node.role == Role.CANDIDATE and node.leader_id is None
    now = 0.01
    while not (requests := only(sent(node), VoteRequest)):
        now += 0.01
        node.tick(now)
    assert now < LEAK / 2
    # In term 2 every voter voted for "a": the campaign is for term 3.
    assert {r.term for r in requests} == {3}


def test_learner_never_campaigns_but_forgets_a_silent_leader() -> None:
    node = new_node("d", voters=("a", "b", "c"), learners=("d",), term=2)
    node.step(HeartbeatRequest(src="a", dst="d", term=2), 0.0)
    assert sent(node)
    assert (node.role, node.leader_id) == (Role.LEARNER, "a")
    node.tick(LEAK + 0.01)
    node.tick(10.0)
    assert sent(node) == []
    # A learner that kept the dead leader would answer REJECT_ALREADY_HAS_LEADER
    # to every candidate of this term (once promoted) and stall elections.
    assert node.leader_id is None


# --- the leader's verdict ----------------------------------------------------------------


def tally(*codes: HeartbeatResponseCode, voters: int = 5, term: int = 3) -> HeartbeatTally:
    result = HeartbeatTally(term=term, voter_count=voters)
    for i, code in enumerate(codes):
        result.record(f"n{i}", code, term + 1 if code == Code.EXPIRED_TERM else term)
    return result


def test_heartbeat_majority_success_refreshes_the_leader() -> None:
    verdict = tally(Code.SUCCESS, Code.SUCCESS).verdict(silent_for=9.0, max_silence=LEAK)
    assert verdict == HeartbeatVerdict.SUCCEEDED


def test_heartbeat_success_plus_not_ready_majority_resends_at_once() -> None:
    verdict = tally(Code.SUCCESS, Code.TERM_NOT_READY).verdict(silent_for=9.0, max_silence=LEAK)
    assert verdict == HeartbeatVerdict.RESEND_NOW


def test_heartbeat_bigger_term_without_majority_steps_down() -> None:
    verdict = tally(Code.EXPIRED_TERM).verdict(silent_for=0.0, max_silence=LEAK)
    assert verdict == HeartbeatVerdict.STEP_DOWN_BIGGER_TERM


def test_heartbeat_inconsistent_leader_without_majority_steps_down() -> None:
    verdict = tally(Code.INCONSISTENT_LEADER).verdict(silent_for=0.0, max_silence=LEAK)
    assert verdict == HeartbeatVerdict.STEP_DOWN_INCONSISTENT_LEADER


def test_heartbeat_minority_keeps_leader_until_leak_then_steps_down() -> None:
    assert tally(Code.SUCCESS).verdict(silent_for=LEAK, max_silence=LEAK) == HeartbeatVerdict.KEEP
    verdict = tally(Code.SUCCESS).verdict(silent_for=LEAK + 0.01, max_silence=LEAK)
    assert verdict == HeartbeatVerdict.STEP_DOWN_LEAK


def test_heartbeat_bigger_term_is_ignored_when_majority_succeeds() -> None:
    verdict = tally(Code.SUCCESS, Code.SUCCESS, Code.EXPIRED_TERM).verdict(
        silent_for=0.0, max_silence=LEAK
    )
    assert verdict == HeartbeatVerdict.SUCCEEDED


def test_leader_sends_heartbeats_every_interval() -> None:
    nodes = {n: new_node(n) for n in "abc"}
    elect(nodes, "a")
    leader = nodes["a"]
    leader.tick(CONFIG.heartbeat_interval / 2)
    assert only(sent(leader), HeartbeatRequest) == []
    leader.tick(CONFIG.heartbeat_interval)
    assert sorted(m.dst for m in only(sent(leader), HeartbeatRequest)) == ["b", "c"]


def test_isolated_leader_steps_down_after_heartbeat_leak() -> None:
    nodes = {n: new_node(n) for n in "abc"}
    elect(nodes, "a")
    leader = nodes["a"]
    now = 0.0
    while leader.role == Role.LEADER and now < 5.0:
        now += 0.01
        leader.tick(now)
        sent(leader)  # nothing arrives
    assert leader.role == Role.CANDIDATE
    assert LEAK < now <= LEAK + 2 * CONFIG.heartbeat_interval


def test_leader_resends_heartbeat_at_once_when_followers_are_not_ready() -> None:
    nodes = {n: new_node(n) for n in "abc"}
    elect(nodes, "a")
    leader = nodes["a"]
    leader.tick(CONFIG.heartbeat_interval)
    beats = only(sent(leader), HeartbeatRequest)
    for hb in beats:
        leader.step(
            HeartbeatResponse(src=hb.dst, dst="a", term=hb.term, code=Code.TERM_NOT_READY,
                              round=hb.round),
            CONFIG.heartbeat_interval,
        )  # fmt: skip
    leader.tick(CONFIG.heartbeat_interval + 0.01)
    assert len(only(sent(leader), HeartbeatRequest)) == 2


def test_leader_answered_only_through_appends_keeps_leading() -> None:
    """Heartbeat answers late behind a stream of appends are not silence: the append
    answers of a majority keep the leader in place."""
    nodes = {n: new_node(n) for n in "abc"}
    elect(nodes, "a")
    leader = nodes["a"]
    now = 0.0
    while now < 5 * LEAK:
        now += 0.01
        leader.tick(now)
        for msg in sent(leader):
            if isinstance(msg, AppendRequest) and msg.dst == "b":
                leader.step(AppendResponse(src="b", dst="a", term=leader.term,
                                           code=AppendResponseCode.SUCCESS,
                                           prev_index=msg.prev_index,
                                           match_index=leader.last_index,
                                           last_index=leader.last_index, seq=msg.seq), now)
        leader.propose_batch([b"x"])  # each tick's entry is pushed and answered
    assert leader.role == Role.LEADER
    while leader.role == Role.LEADER and now < 10 * LEAK:
        now += 0.01
        leader.tick(now)
        sent(leader)  # and now nothing arrives
    assert leader.role == Role.CANDIDATE
