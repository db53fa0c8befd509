"""SyncStateSet, confirmOffset and write acks on the master, with time passed in."""

from __future__ import annotations

from mqcluster.ha.sync_state import SyncStateView


def view() -> SyncStateView:
    v = SyncStateView(master_id=1, members={1, 2, 3}, epoch=1, master_max=1000)
    v.connected(2, False, now_ms=0)
    v.connected(3, False, now_ms=0)
    return v


def test_confirm_offset_is_the_least_member_offset() -> None:
    v = view()
    v.acked(2, 1000, 10)
    v.acked(3, 600, 10)
    assert v.confirm_offset == 600
    assert not v.acked_by_all(1000) and v.acked_by_all(600)
    assert v.acked_count(1000) == 2


def test_a_laggard_leaves_and_a_caught_up_replica_returns() -> None:
    v = view()
    v.transferred(2, 0)
    v.transferred(3, 0)
    v.acked(2, 1000, 100)
    v.acked(3, 100, 100)
    assert v.wanted_members(now_ms=5_000, max_not_caught_up_ms=15_000) == {1, 2, 3}
    v.acked(2, 1000, 19_000)  # heartbeats keep an idle, caught-up replica fresh
    assert v.wanted_members(now_ms=20_000, max_not_caught_up_ms=15_000) == {1, 2}
    assert v.propose({1, 2}) == {1, 2}
    assert v.ack_members == {1, 2, 3}, "acks need the union while the change is pending"
    assert v.propose({1}) is None, "one change at a time"
    v.accepted({1, 2}, 2)
    assert v.members == {1, 2} and v.confirm_offset == 1000
    v.acked(3, 1000, 21_000)
    assert v.wanted_members(now_ms=21_000, max_not_caught_up_ms=15_000) == {1, 2, 3}


def test_disconnected_member_and_learner_are_dropped() -> None:
    v = view()
    v.replicas[3].async_learner = True
    v.disconnected(2)
    assert v.wanted_members(now_ms=1, max_not_caught_up_ms=15_000) == {1}


def test_learner_never_joins() -> None:
    v = SyncStateView(master_id=1, members={1}, epoch=1, master_max=500)
    v.connected(4, True, 0)
    v.acked(4, 500, 1)
    assert v.wanted_members(now_ms=2, max_not_caught_up_ms=15_000) == {1}
