"""The controller's per-group gauges (read from the replicated state at each scrape) and
its failover counter."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from mqcluster.controller.events import (
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    ElectMasterEvent,
)
from mqcluster.controller.metrics import ControllerMetrics
from mqcluster.controller.service import ControllerService
from mqcluster.controller.statemachine import ControllerState
from mqcluster_testing.controller.standin import StandInBroker

Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def series(metrics: ControllerMetrics) -> Series:
    out: Series = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def group(*extra: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((("broker", "g"), ("cluster", "c"), *extra)))


def test_group_gauges_follow_the_state() -> None:
    state = ControllerState()
    metrics = ControllerMetrics()
    metrics.watch_state(state)
    assert not [k for k in series(metrics) if k[0].startswith("mqcontroller_group_")]
    for bid in (1, 2, 3):
        state.apply(ApplyBrokerIdEvent("c", "g", f"127.0.0.1:{bid}", bid, f"code{bid}"))
    state.apply(ElectMasterEvent("g", 1))
    state.apply(AlterSyncStateSetEvent("g", frozenset({1, 2})))
    got = series(metrics)
    assert got[("mqcontroller_group_has_master", group())] == 1
    assert got[("mqcontroller_group_master_broker_id", group())] == 1
    assert got[("mqcontroller_group_master_epoch", group())] == 1
    assert got[("mqcontroller_group_replicas", group())] == 3
    assert got[("mqcontroller_sync_state_set_size", group())] == 2
    members = {k[1] for k in got if k[0] == "mqcontroller_sync_state_set_member"}
    assert members == {group(("broker_id", "1")), group(("broker_id", "2"))}
    # no eligible replica: the master is cleared, the gauge says so and no id is exported
    state.apply(ElectMasterEvent("g", None))
    got = series(metrics)
    assert got[("mqcontroller_group_has_master", group())] == 0
    assert ("mqcontroller_group_master_broker_id", group()) not in got


async def test_a_failover_counts_one_master_change_for_its_group(
    make_service: Callable[..., ControllerService], tmp_path: Path
) -> None:
    svc = make_service()
    await svc.start()
    a, b = (StandInBroker(svc.self_addr, "c", "g", tmp_path / n, epoch=1) for n in "ab")
    try:
        for x in (a, b):
            await x.start(heartbeat=False)
            await x.heartbeat_once()
        info = await a.replica_info()
        await a.client.alter_sync_state_set("g", 1, info.master_epoch, {1, 2}, 1)
        # the first master (elected at registration) counts too
        assert series(svc.metrics).get(("mqcontroller_master_changes_total", group()),
                                       0) == 1
        done = svc.elections_done
        await a.close()
        await svc.wait_for(lambda: svc.elections_done > done, timeout=5)
        got = series(svc.metrics)
        assert got[("mqcontroller_master_changes_total", group())] == 2
        assert got[("mqcontroller_group_master_broker_id", group())] == 2
        assert got[("mqcontroller_group_master_epoch", group())] == 2
    finally:
        for x in (a, b):
            await x.close()
