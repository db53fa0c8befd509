"""The DLedger-to-Controller migration planner, on tables of states."""

from __future__ import annotations

from typing import Any

import pytest

from mqcluster_operator.follow.migration_plan import (
    MigrationFacts,
    Rendering,
    migrates_first,
    plan_migration,
    rendering,
)
from mqcluster_operator.models import BrokerGroupSpec


def spec(mode: str = "Controller", **migration: Any) -> BrokerGroupSpec:
    return BrokerGroupSpec.model_validate({
        "mode": mode, "replicas": 3, "controllerRef": {"name": "ctl"},
        "migration": migration,
    })


HEALTHY = MigrationFacts(now=1000.0, controller_ready=True, ready_replicas=3, leader="g-0",
                         lag=5, pods=3)


def draining(since: float = 1000.0, **extra: Any) -> dict[str, Any]:
    return {"step": "Draining", "id": "m1000", "since": since, "startedAt": since, **extra}


def test_nothing_to_do_without_a_mode_change() -> None:
    assert plan_migration(spec("DLedger"), "DLedger", None, None, HEALTHY) is None
    assert plan_migration(spec(), "Controller", None, None, HEALTHY) is None
    assert plan_migration(spec(), None, None, None, HEALTHY) is None


@pytest.mark.parametrize(("facts", "reason"), [
    (MigrationFacts(now=1.0, controller_ready=False, ready_replicas=3, leader="g-0"),
     "ControllerNotReady"),
    (MigrationFacts(now=1.0, controller_ready=True, ready_replicas=2, leader="g-0"),
     "GroupDegraded"),
    (MigrationFacts(now=1.0, controller_ready=True, ready_replicas=3, leader=None),
     "GroupDegraded"),
])
def test_preconditions_change_nothing(facts: MigrationFacts, reason: str) -> None:
    step = plan_migration(spec(), "DLedger", None, None, facts)
    assert step is not None
    assert step.action is None and step.status is None
    assert rendering(spec(), "DLedger", None) == Rendering("DLedger")
    assert step.condition is not None and step.condition[:2] == (False, reason)


def test_start_turns_writes_off_and_records_the_drain() -> None:
    step = plan_migration(spec(), "DLedger", None, None, HEALTHY)
    assert step is not None
    assert step.action == "writes_off"
    assert step.status == draining(progress="writes off")
    assert rendering(spec(), "DLedger", step.status) == Rendering("DLedger")
    assert step.condition is not None and step.condition[0] is True


@pytest.mark.parametrize(("lag", "now", "step_after", "action"), [
    (5, 1010.0, "Draining", "writes_off"),
    (None, 1010.0, "Draining", "writes_off"),
    (0, 1010.0, "Stopping", None),
    (5, 1000.0 + 3601, "Failed", "writes_on"),
])
def test_draining_waits_for_the_consumers(lag: int | None, now: float, step_after: str,
                                          action: str | None) -> None:
    facts = MigrationFacts(now=now, lag=lag, pods=3, metadata_behind=())
    step = plan_migration(spec(), "DLedger", draining(), None, facts)
    assert step is not None
    assert step.action == action
    recorded = step.status or draining()
    assert recorded["step"] == step_after
    assert rendering(spec(), "DLedger", recorded) == Rendering(
        "DLedger", stopped=step_after == "Stopping")


def test_draining_shows_the_remaining_lag_and_writes_status_only_when_it_changes() -> None:
    step = plan_migration(spec(), "DLedger", draining(), None, MigrationFacts(now=1001, lag=7))
    assert step is not None and step.status is not None
    assert step.status["progress"] == "7 message(s) left to consume"
    again = plan_migration(spec(), "DLedger", step.status, None, MigrationFacts(now=1002, lag=7))
    assert again is not None and again.status is None


def test_retention_window_policy_waits_the_window_whatever_the_lag() -> None:
    s = spec(drainPolicy="RetentionWindow", retentionWindowSeconds=60)
    early = plan_migration(s, "DLedger", draining(), None, MigrationFacts(now=1030, lag=0))
    assert early is not None and early.status is not None
    assert early.status["step"] == "Draining"
    assert early.status["progress"] == "30s of the retention window left"
    late = plan_migration(s, "DLedger", draining(), None,
                          MigrationFacts(now=1061, lag=9, metadata_behind=()))
    assert late is not None and late.status is not None and late.status["step"] == "Stopping"


@pytest.mark.parametrize(("policy", "lag", "behind", "now", "step_after", "progress"), [
    ({}, 0, None, 1010.0, "Draining",
     "drained; comparing the replicas' topics and subscription groups with the leader's"),
    ({}, 0, ("g-2",), 1010.0, "Draining",
     "drained; waiting for g-2 to copy the leader's topics and subscription groups"),
    ({}, 0, (), 1010.0, "Stopping", "stopping pods"),
    ({}, 3, (), 1010.0, "Draining", "3 message(s) left to consume"),
    ({"drainPolicy": "RetentionWindow", "retentionWindowSeconds": 5}, 9, ("g-1", "g-2"),
     1010.0, "Draining",
     "drained; waiting for g-1, g-2 to copy the leader's topics and subscription groups"),
    ({"drainPolicy": "RetentionWindow", "retentionWindowSeconds": 5}, 9, (), 1010.0,
     "Stopping", "stopping pods"),
    ({}, 0, ("g-1",), 1000.0 + 3601, "Failed",
     "consumers did not drain within 3600s (drained; waiting for g-1 to copy the leader's"
     " topics and subscription groups)"),
])
def test_stopping_waits_until_every_replica_holds_the_leaders_topics_and_groups(
        policy: dict[str, Any], lag: int, behind: tuple[str, ...] | None, now: float,
        step_after: str, progress: str) -> None:
    """The store clear keeps each pod's own topics.json, and any replica may be elected
    master in controller mode: a follower without the leader's newest topic loses it."""
    facts = MigrationFacts(now=now, lag=lag, pods=3, metadata_behind=behind)
    step = plan_migration(spec(**policy), "DLedger", draining(), None, facts)
    assert step is not None and step.status is not None
    assert (step.status["step"], step.status["progress"]) == (step_after, progress)


@pytest.mark.parametrize(("mode", "annotation"), [("Controller", "abort"), ("DLedger", None)])
def test_abort_before_the_stores_are_touched_restores_writes(mode: str,
                                                             annotation: str | None) -> None:
    step = plan_migration(spec(mode), "DLedger", draining(), annotation,
                          MigrationFacts(now=1005, lag=3))
    assert step is not None
    assert step.action == "writes_on"
    assert step.status is not None and step.status["step"] == "Aborted"
    assert rendering(spec(mode), "DLedger", step.status) == Rendering("DLedger")
    assert step.clear_annotation == (annotation == "abort")


def test_after_an_abort_the_group_waits_for_a_person_then_starts_again() -> None:
    aborted = draining(step="Aborted")
    waiting = plan_migration(spec(), "DLedger", aborted, None, HEALTHY)
    assert waiting is not None and waiting.action is None and waiting.status is None
    assert waiting.condition is not None and waiting.condition[1] == "Aborted"
    again = plan_migration(spec(), "DLedger", aborted, "start", HEALTHY)
    assert again is not None and again.action == "writes_off" and again.clear_annotation
    back = plan_migration(spec("DLedger"), "DLedger", aborted, None, HEALTHY)
    assert back is not None and back.status == {}


def test_stopping_waits_for_every_pod_then_restarts_in_controller_mode_clearing_stores() -> None:
    stopping = draining(step="Stopping")
    wait = plan_migration(spec(), "DLedger", stopping, None, MigrationFacts(now=1100, pods=1))
    assert wait is not None and wait.status is None
    assert rendering(spec(), "DLedger", stopping) == Rendering("DLedger", stopped=True)
    go = plan_migration(spec(), "DLedger", stopping, None, MigrationFacts(now=1101, pods=0))
    assert go is not None and go.status is not None and go.status["step"] == "Restarting"
    assert rendering(spec(), "DLedger", go.status) == Rendering("Controller",
                                                                 clear_store="m1000")


def test_abort_after_the_stores_may_be_cleared_is_refused() -> None:
    stopping = draining(step="Stopping")
    step = plan_migration(spec(), "DLedger", stopping, "abort", MigrationFacts(now=1100, pods=2))
    assert step is not None and step.action is None and step.status is None
    assert step.event is not None and step.event[0] == "Warning"
    assert "only goes forward" in step.event[1]
    assert step.clear_annotation


@pytest.mark.parametrize(("registered", "master", "sss", "done"), [
    (2, "g-0", 2, False),
    (3, None, 0, False),
    (3, "g-0", 2, False),
    (3, "g-0", 3, True),
])
def test_restarting_writes_on_only_when_the_group_is_whole(
        registered: int, master: str | None, sss: int, done: bool) -> None:
    restarting = draining(step="Restarting")
    facts = MigrationFacts(now=1200, registered=registered, master=master, sync_state_set=sss)
    step = plan_migration(spec(), "DLedger", restarting, None, facts)
    assert step is not None and (step.action == "writes_on") == done
    if done:
        assert step.status is not None and step.status["step"] == "Done"
        assert step.condition == (False, "Completed", "migrated to controller mode; master g-0")


def test_a_finished_migration_keeps_rendering_controller_mode() -> None:
    done = draining(step="Done")
    assert plan_migration(spec(), "Controller", done, None, HEALTHY) is None
    assert rendering(spec(), "Controller", done) == Rendering("Controller", clear_store="m1000")


def test_every_step_resumes_from_its_record() -> None:
    """An operator restarted at any step plans from status alone: same input, same step."""
    for recorded in (draining(), draining(step="Stopping"), draining(step="Restarting")):
        facts = MigrationFacts(now=1300, lag=0, pods=0, registered=3, master="g-1",
                               sync_state_set=3, metadata_behind=())
        first = plan_migration(spec(), "DLedger", recorded, None, facts)
        second = plan_migration(spec(), "DLedger", recorded, None, facts)
        assert first == second


def group(name: str, mode: str = "Controller", applied: str = "DLedger",
          step: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"appliedMode": applied}
    if step:
        status["migration"] = {"step": step}
    return {"metadata": {"name": name}, "spec": {"mode": mode}, "status": status}


@pytest.mark.parametrize(("others", "first"), [
    ([], None),
    ([group("b")], None),                        # both wait: "a" comes first by name
    ([group("0")], "0"),
    ([group("z", step="Stopping")], "z"),        # one under way goes on
    ([group("0", step="Done", applied="Controller")], None),
    ([group("0", step="Failed")], None),         # a failed one does not hold the others
    ([group("0", mode="DLedger", applied="DLedger")], None),
])
def test_one_group_of_a_cluster_migrates_at_a_time(others: list[dict[str, Any]],
                                                    first: str | None) -> None:
    assert migrates_first("a", [group("a"), *others]) == first


def test_a_group_waiting_for_another_changes_nothing() -> None:
    facts = MigrationFacts(now=1.0, controller_ready=True, ready_replicas=3, leader="g-0",
                           waiting_for="other")
    step = plan_migration(spec(), "DLedger", None, None, facts)
    assert step is not None and step.action is None and step.status is None
    assert step.condition is not None and step.condition[1] == "WaitingForGroup"
