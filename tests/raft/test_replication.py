"""Raft replication: nextIndex/matchIndex, conflicts, majority commit, batch push pipeline."""

from __future__ import annotations

from mqcluster.raft.core import RaftNode
from mqcluster.raft.types import (
    AppendRequest,
    AppendResponse,
    AppendResponseCode,
    Entry,
    EntryType,
    HeartbeatRequest,
    Message,
    Role,
)
from tests.raft.helpers import (
    CONFIG,
    config,
    elect,
    entries_with_terms,
    exchange,
    new_node,
    one,
    only,
    sent,
    settle,
)

Code = AppendResponseCode


def group(**kw: object) -> dict[str, RaftNode]:
    nodes = {n: new_node(n, **kw) for n in "abc"}  # type: ignore[arg-type]
    elect(nodes, "a")
    return nodes


def test_new_leader_appends_a_noop_of_its_term() -> None:
    nodes = group()
    leader = nodes["a"]
    noop = leader.entries(1, 1)[0]
    assert (noop.type, noop.term) == (EntryType.NOOP, leader.term)
    assert all(n.last_index == 1 for n in nodes.values())


def test_proposal_commits_once_a_majority_holds_it() -> None:
    nodes = group()
    leader = nodes["a"]
    index = leader.propose(b"x")
    pushes = sent(leader)
    answers = exchange(nodes, [m for m in pushes if m.dst == "b"], 0.0)  # c never gets it
    assert leader.commit_index < index
    settle(nodes, answers, 0.0)
    assert leader.commit_index == index
    assert nodes["c"].last_index < index


def test_proposal_on_follower_raises_not_leader_with_leader_hint() -> None:
    from mqcluster.raft.types import NotLeaderError

    nodes = group()
    try:
        nodes["b"].propose(b"x")
    except NotLeaderError as err:
        assert err.leader_id == "a"
    else:
        raise AssertionError("follower accepted a proposal")


def test_leader_counts_its_own_entry_only_once_persisted() -> None:
    nodes = {n: new_node(n, voters=("a", "b", "c")) for n in "abc"}
    elect(nodes, "a")
    leader = nodes["a"]
    leader.propose(b"x")
    rd = leader.ready()  # handed to storage, not yet advanced
    index = rd.entries[-1].index
    for push in only(rd.messages, AppendRequest, "b"):
        nodes["b"].step(push, 0.0)
    for answer in sent(nodes["b"]):
        leader.step(answer, 0.0)
    # b and the not-yet-fsynced leader: b alone is not a majority of three.
    assert leader.commit_index < index
    leader.advance(rd)
    assert leader.commit_index == index


def _entry_written_not_synced() -> tuple[dict[str, RaftNode], RaftNode, list[Message], int]:
    """A leader of a, b, c that wrote a new entry, sent it, and has not fsync'd it yet."""
    nodes = {n: new_node(n, voters=("a", "b", "c")) for n in "abc"}
    elect(nodes, "a")
    leader = nodes["a"]
    leader.propose(b"x")
    rd = leader.ready()
    leader.advance(rd, entries_durable=False)
    return nodes, leader, rd.messages, rd.entries[-1].index


def test_leader_writing_behind_commits_on_two_followers_before_its_own_fsync() -> None:
    nodes, leader, pushes, index = _entry_written_not_synced()
    assert leader.match_index("a") < index
    answers = exchange(nodes, [m for m in pushes if m.dst == "b"], 0.0)
    for answer in answers:
        leader.step(answer, 0.0)
    assert leader.commit_index < index  # b alone is not a majority of three
    answers = exchange(nodes, [m for m in pushes if m.dst == "c"], 0.0)
    for answer in answers:
        leader.step(answer, 0.0)
    assert leader.commit_index == index  # b and c are
    leader.entries_persisted(index, leader.term)
    assert leader.match_index("a") == index


def test_leader_writing_behind_counts_itself_once_the_fsync_reports() -> None:
    nodes, leader, pushes, index = _entry_written_not_synced()
    for answer in exchange(nodes, [m for m in pushes if m.dst == "b"], 0.0):
        leader.step(answer, 0.0)
    assert leader.commit_index < index
    leader.entries_persisted(index, leader.term)
    assert leader.commit_index == index  # the leader and b


def test_a_late_fsync_report_of_an_older_leadership_is_ignored() -> None:
    node = new_node("a", voters=("a",))
    node.tick(0.0)
    node.propose(b"x")
    rd = node.ready()
    index, term = rd.entries[-1].index, node.term
    node.advance(rd, entries_durable=False)
    assert node.commit_index < index
    node.entries_persisted(index, term + 1)  # not this leadership's report
    assert node.commit_index < index
    node.entries_persisted(index + 5, term)  # never past what storage was handed
    assert node.match_index("a") == index
    assert node.commit_index == index


def test_follower_commit_is_min_of_leader_commit_and_last_verified_index() -> None:
    # Follower holds stale entries 2..4 of term 1 that the leader's append does not cover.
    follower = new_node("b", term=2, entries=entries_with_terms(1, 1, 1, 1))
    follower.step(
        AppendRequest(src="a", dst="b", term=2, prev_index=1, prev_term=1, entries=[],
                      commit_index=4),
        0.0,
    )  # fmt: skip
    assert one(sent(follower), AppendResponse).code == Code.SUCCESS
    assert follower.commit_index == 1  # only index 1 is known to match the leader
    entry = Entry(index=2, term=1, type=EntryType.NORMAL, data=b"e2")
    follower.step(
        AppendRequest(src="a", dst="b", term=2, prev_index=1, prev_term=1, entries=[entry],
                      commit_index=4),
        0.0,
    )  # fmt: skip
    assert follower.commit_index == 2
    follower.step(HeartbeatRequest(src="a", dst="b", term=2, commit_index=9), 0.0)
    assert follower.commit_index == 2


def test_follower_truncates_conflicting_suffix_and_appends_leaders_entries() -> None:
    follower = new_node("b", term=3, entries=entries_with_terms(1, 1, 2, 2))
    take_ready = follower.ready()
    follower.advance(take_ready)
    new = [Entry(index=3, term=3, type=EntryType.NORMAL, data=b"n3")]
    follower.step(
        AppendRequest(src="a", dst="b", term=3, prev_index=2, prev_term=1, entries=new,
                      commit_index=0),
        0.0,
    )  # fmt: skip
    rd = follower.ready()
    assert rd.truncate_from == 3
    assert [(e.index, e.term) for e in rd.entries] == [(3, 3)]
    assert follower.last_index == 3
    assert one(rd.messages, AppendResponse).match_index == 3


def test_duplicate_append_does_not_truncate() -> None:
    follower = new_node("b", term=3, entries=entries_with_terms(1, 1, 3))
    old = [Entry(index=2, term=1, type=EntryType.NORMAL, data=b"e2")]
    follower.step(
        AppendRequest(src="a", dst="b", term=3, prev_index=1, prev_term=1, entries=old,
                      commit_index=0),
        0.0,
    )  # fmt: skip
    rd = follower.ready()
    assert rd.truncate_from is None
    assert follower.last_index == 3


def test_follower_rejects_mismatching_prev_entry_with_its_last_index() -> None:
    follower = new_node("b", term=3, entries=entries_with_terms(1, 1, 2))
    follower.step(
        AppendRequest(src="a", dst="b", term=3, prev_index=6, prev_term=3, entries=[],
                      commit_index=0),
        0.0,
    )  # fmt: skip
    answer = one(sent(follower), AppendResponse)
    assert (answer.code, answer.last_index, answer.prev_index) == (Code.INCONSISTENT_STATE, 3, 6)


def test_seed_004_alignment_skips_back_to_the_followers_last_index() -> None:
    # A follower E far behind: the leader's log has terms 1,1,2,3,3,3; E has 1,1 and a
    # stale entry 3 of term 1. The leader probes at its end, E answers its last
    # index (3) so the leader jumps there; entry 3 conflicts and E's hint skips the
    # whole stale run; the match is found and E is overwritten.
    nodes = {n: new_node(n, term=4, entries=entries_with_terms(1, 1, 2, 3, 3, 3)) for n in "ac"}
    elect(nodes, "a")
    leader = nodes["a"]
    nodes["b"] = new_node("b", term=leader.term, entries=entries_with_terms(1, 1, 1))
    now = CONFIG.append_retry_timeout  # the push lost while b was away is retried
    leader.tick(now)
    messages = sent(leader)
    probes: list[int] = []
    for _ in range(20):
        probes += [m.prev_index for m in only(messages, AppendRequest, "b")]
        messages = exchange(nodes, messages, now)
        if not messages:
            break
    assert probes[:3] == [6, 3, 0]
    assert nodes["b"].entries(1, 7) == leader.entries(1, 7)


def test_old_term_entry_commits_only_together_with_a_current_term_entry() -> None:
    # a has an entry of term 2 that b lacks; a wins term 3 and appends its NOOP.
    nodes = {
        "a": new_node("a", term=2, entries=entries_with_terms(1, 2)),
        "b": new_node("b", term=2, entries=entries_with_terms(1)),
        "c": new_node("c", term=2, entries=entries_with_terms(1)),
    }
    elect(nodes, "a")
    leader = nodes["a"]
    assert leader.entries(3, 3)[0].type == EntryType.NOOP
    assert leader.commit_index == 3
    assert leader.entries(2, 2)[0].term == 2  # committed through the NOOP


def test_pipeline_keeps_at_most_the_window_of_pushes_in_flight() -> None:
    nodes = group(cfg=config(max_inflight_appends=3, max_batch_entries=2))
    leader = nodes["a"]
    leader.propose_batch([b"x"] * 20)
    pushes = only(sent(leader), AppendRequest, "b")
    assert len(pushes) == 3
    assert [len(p.entries) for p in pushes] == [2, 2, 2]
    assert [p.prev_index for p in pushes] == [1, 3, 5]
    # Each acknowledgement opens the window for one more push.
    nodes["b"].step(pushes[0], 0.0)
    leader.step(one(sent(nodes["b"]), AppendResponse), 0.0)
    more = only(sent(leader), AppendRequest, "b")
    assert [p.prev_index for p in more] == [7]


def test_batch_respects_max_bytes() -> None:
    nodes = group(cfg=config(max_batch_entries=100, max_batch_bytes=10))
    leader = nodes["a"]
    leader.propose_batch([b"0123456"] * 3)
    pushes = only(sent(leader), AppendRequest, "b")
    assert [len(p.entries) for p in pushes] == [1, 1, 1]


def test_lost_push_is_resent_after_the_retry_timeout() -> None:
    nodes = group()
    leader = nodes["a"]
    leader.propose(b"x")
    lost = only(sent(leader), AppendRequest, "b")
    assert lost
    leader.tick(CONFIG.append_retry_timeout / 2)
    assert only(sent(leader), AppendRequest, "b") == []
    leader.tick(CONFIG.append_retry_timeout)
    again = only(sent(leader), AppendRequest, "b")
    assert again and again[0].prev_index == 1


def test_gap_in_pipeline_answers_once_and_probes_from_the_match() -> None:
    nodes = group(cfg=config(max_inflight_appends=3, max_batch_entries=1))
    leader = nodes["a"]
    leader.propose_batch([b"x", b"y", b"z"])
    pushes = only(sent(leader), AppendRequest, "b")
    follower = nodes["b"]
    for push in pushes[1:]:  # the first push is lost
        follower.step(push, 0.0)
    rejections = sent(follower)
    assert [r.code for r in only(rejections, AppendResponse)] == [Code.INCONSISTENT_STATE] * 2
    resent: list[AppendRequest] = []
    for answer in rejections:
        leader.step(answer, 0.0)
        resent += only(sent(leader), AppendRequest, "b")
    assert len(resent) == 1  # the second rejection predates the reset and is ignored
    assert resent[0].prev_index == 1
    settle(nodes, exchange(nodes, resent, 0.0), 0.0)
    assert follower.last_index == leader.last_index


def test_follower_rejects_append_of_an_expired_term() -> None:
    follower = new_node("b", term=4)
    follower.step(
        AppendRequest(src="a", dst="b", term=3, prev_index=0, prev_term=0, entries=[],
                      commit_index=0),
        0.0,
    )  # fmt: skip
    answer = one(sent(follower), AppendResponse)
    assert (answer.code, answer.term) == (Code.EXPIRED_TERM, 4)


def test_leader_steps_down_when_an_append_answer_carries_a_bigger_term() -> None:
    nodes = group()
    leader = nodes["a"]
    leader.step(AppendResponse(src="b", dst="a", term=leader.term + 1, code=Code.EXPIRED_TERM), 0.0)
    assert leader.role == Role.CANDIDATE
    assert leader.need_increase_term_immediately


def test_single_node_commits_after_persisting_and_hands_entries_out_once() -> None:
    node = new_node("a", voters=("a",))
    node.tick(0.0)
    assert node.role == Role.LEADER
    node.propose_batch([b"x", b"y"])
    first = node.ready()
    assert [e.index for e in first.entries] == [1, 2, 3]
    assert first.committed == []  # not yet durable anywhere
    node.advance(first)
    second = node.ready()
    node.advance(second)
    assert [e.data for e in second.committed] == [b"", b"x", b"y"]
    assert not node.has_ready()
