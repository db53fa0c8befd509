"""Health per group: masters as discovery reports them, failures as probes and calls
report them, what /health and /metrics then say."""

from __future__ import annotations

import asyncio

from prometheus_client.parser import text_string_to_metric_families

from mqcluster.proxy.groups import DOWN, NO_MASTER, UP, GroupState, GroupTable
from mqcluster.proxy.metrics import ProxyMetrics, health_of


def table() -> tuple[GroupTable, list[tuple[GroupState | None, GroupState]]]:
    t = GroupTable(failures_to_down=2)
    seen: list[tuple[GroupState | None, GroupState]] = []
    t.listeners.append(lambda old, new: seen.append((old, new)))
    return t, seen


def test_a_group_is_usable_while_its_master_answers() -> None:
    t, _ = table()
    t.sighted("a", "a0:10911", "a0:8081", 1)
    assert t.usable("a") == "a0:8081"
    t.failed("a", "a0:8081", "DEADLINE_EXCEEDED")
    assert t.usable("a") == "a0:8081"  # one miss is no verdict
    t.failed("a", "a0:8081", "DEADLINE_EXCEEDED")
    assert t.usable("a") is None and t.health() == {"a": DOWN}
    t.answered("a", "a0:8081")  # woken up (SIGCONT)
    assert t.health() == {"a": UP}


def test_a_new_master_is_usable_at_once_and_failures_of_the_old_one_do_not_count() -> None:
    t, seen = table()
    t.sighted("a", "a0:10911", "a0:8081", 1)
    t.failed("a", "a0:8081", "x")
    t.failed("a", "a0:8081", "x")
    assert t.sighted("a", "a1:10911", "a1:8081", 2)
    assert t.usable("a") == "a1:8081"
    t.failed("a", "a0:8081", "late answer of a call to the old master")
    t.failed("a", "a0:8081", "x")
    assert t.usable("a") == "a1:8081"
    assert [(o.master_addr if o else None, n.master_addr) for o, n in seen] == [
        (None, "a0:10911"), ("a0:10911", "a1:10911")]


def test_an_older_epoch_never_replaces_a_newer_master() -> None:
    t, seen = table()
    t.sighted("a", "a1:10911", "a1:8081", 5)
    assert not t.sighted("a", "a0:10911", "a0:8081", 4)
    assert t.usable("a") == "a1:8081" and len(seen) == 1


def test_a_group_without_a_master_says_so() -> None:
    t, _ = table()
    t.sighted("a", None, None, 3)
    assert t.health() == {"a": NO_MASTER} and t.usable_groups() == []


def test_health_per_group_and_overall() -> None:
    t, _ = table()
    assert health_of(t, False) == (503, {"status": "NO_GROUP", "groups": {}})
    t.sighted("a", "a0:10911", "a0:8081", 1)
    t.sighted("b", "b0:10911", "b0:8081", 1)
    code, body = health_of(t, False)
    assert (code, body["status"]) == (200, "UP")
    t.failed("b", "b0:8081", "probe: DEADLINE_EXCEEDED")
    t.failed("b", "b0:8081", "probe: DEADLINE_EXCEEDED")
    code, body = health_of(t, False)
    assert (code, body["status"]) == (200, "DEGRADED")  # a still serves
    assert body["groups"]["b"] == {"status": DOWN, "masterAddr": "b0:10911",
                                   "masterGrpc": "b0:8081", "masterEpoch": 1,
                                   "reason": "probe: DEADLINE_EXCEEDED"}
    assert body["groups"]["a"]["status"] == UP
    t.failed("a", "a0:8081", "x")
    t.failed("a", "a0:8081", "x")
    assert health_of(t, False)[1]["status"] == "DOWN"
    code, body = health_of(t, True)
    assert (code, body["status"]) == (503, "DRAINING")  # readiness off during a drain


def values(m: ProxyMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = m.exposition().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples
            if not s.name.endswith("_created")}


def test_metrics_per_group() -> None:
    t, _ = table()
    m = ProxyMetrics(t)
    t.listeners.append(m.master_changed)
    t.sighted("a", "a0:10911", "a0:8081", 1)
    t.sighted("b", "b0:10911", "b0:8081", 4)
    t.failed("b", "b0:8081", "x")
    t.failed("b", "b0:8081", "x")
    m.call_failed_fast("b", 50002)
    got = values(m)
    assert got[("mqproxy_group_up", (("broker", "a"),))] == 1
    assert got[("mqproxy_group_up", (("broker", "b"),))] == 0
    assert got[("mqproxy_master_known", (("broker", "b"),))] == 1
    assert got[("mqproxy_master_epoch", (("broker", "b"),))] == 4
    assert got[("mqproxy_calls_failed_fast_total",
                (("broker", "b"), ("code", "HA_NOT_AVAILABLE")))] == 1
    t.sighted("b", None, None, 5)  # the master died, none elected yet
    t.sighted("b", "b1:10911", "b1:8081", 6)
    t.sighted("b", "b1:10911", "b1:8081", 7)  # re-elected itself: no move
    assert values(m)[("mqproxy_master_changes_total", (("broker", "b"),))] == 1
    assert ("mqproxy_master_changes_total", (("broker", "a"),)) not in values(m)


async def test_waiters_hear_of_a_verdict() -> None:
    t, _ = table()
    t.sighted("a", "a0:10911", "a0:8081", 1)
    waiting = asyncio.ensure_future(t.wait_change(5))
    await asyncio.sleep(0)
    t.failed("a", "a0:8081", "x")
    assert not waiting.done()
    t.failed("a", "a0:8081", "x")
    assert await waiting
    assert not await t.wait_change(0.01)
