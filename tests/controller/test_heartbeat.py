"""Liveness table and election ranking, with the time passed in."""

from __future__ import annotations

from mqcluster.controller.elect_policy import Candidate, elect
from mqcluster.controller.heartbeat import HeartbeatTable
from mqcluster.protocol.controller import BrokerHeartbeatRequestHeader


def hb(
    bid: int | None, timeout: int | None = None, epoch: int | None = None
) -> BrokerHeartbeatRequestHeader:
    return BrokerHeartbeatRequestHeader(
        cluster_name="c", broker_addr=f"a:{bid}", broker_name="b", broker_id=bid, epoch=epoch,
        max_offset=None, confirm_offset=None, heartbeat_timeout_mills=timeout,
        election_priority=None)


def test_expiry_uses_the_broker_timeout_or_the_default() -> None:
    table = HeartbeatTable(default_timeout_ms=1000)
    table.on_heartbeat(hb(1), 0)
    table.on_heartbeat(hb(2, timeout=5000), 0)
    assert table.on_heartbeat(hb(None), 0) is None  # not registered yet: ignored
    assert table.is_alive("b", 1, 999) and not table.is_alive("b", 1, 1000)
    assert table.is_alive("b", 2, 4999)
    assert [i.broker_id for i in table.pop_expired(1000)] == [1]
    assert table.get("b", 1) is None and len(table) == 1


def test_fields_are_kept_across_partial_heartbeats() -> None:
    table = HeartbeatTable(1000)
    table.on_heartbeat(hb(1, epoch=4), 0)
    table.on_heartbeat(hb(1), 10)
    assert table.candidates("b", 10) == {1: Candidate(1, epoch=4)}


def test_closed_connection_removes_its_brokers_at_once() -> None:
    table = HeartbeatTable(1000)
    conn_a, conn_b = object(), object()
    table.on_heartbeat(hb(1), 0, conn_a)
    table.on_heartbeat(hb(2), 0, conn_b)
    assert [i.broker_id for i in table.pop_connection(conn_a)] == [1]
    assert table.is_alive("b", 2, 1) and not table.is_alive("b", 1, 1)


def test_policy_order() -> None:
    alive = {
        1: Candidate(1, epoch=2, max_offset=100),
        2: Candidate(2, epoch=3, max_offset=1),
        3: Candidate(3, epoch=3, max_offset=1, election_priority=-1),
    }
    assert elect({1, 2, 3}, None, alive, old_master=1) == 1  # alive old master kept
    assert elect({1, 2, 3}, None, alive, old_master=1, designated=2) == 2
    assert elect({1, 2, 3}, None, alive, old_master=9) == 3
    assert elect({4}, None, alive, old_master=9) is None
    assert elect({4}, {1, 2, 3, 4}, alive, old_master=9) == 3
    assert elect({1, 2}, None, alive, old_master=9, designated=3) is None
