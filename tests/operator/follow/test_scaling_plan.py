"""Scaling a controller-mode group, on tables of states."""

from __future__ import annotations

from typing import Any

import pytest

from mqcluster_operator.follow.scaling_plan import ScaleFacts, plan_scale, rendered_replicas

IDS = {"g-0": 1, "g-1": 2, "g-2": 3}


def facts(master: str = "g-0", sss: tuple[str, ...] = ("g-0", "g-1", "g-2"),
          pods: tuple[str, ...] = ("g-0", "g-1", "g-2"), **extra: Any) -> ScaleFacts:
    return ScaleFacts("g", master, list(sss), list(pods), dict(IDS),
                      {p: f"10.0.0.{i}:10911" for p, i in IDS.items()}, **extra)


@pytest.mark.parametrize(("min_in_sync", "sss", "master", "step", "reason", "switchover"), [
    (1, ("g-0", "g-1", "g-2"), "g-0", "Removing", "Removing", None),
    (2, ("g-0", "g-1", "g-2"), "g-0", "Removing", "Removing", None),
    (2, ("g-0", "g-2"), "g-0", "Refused", "BelowMinInSyncReplicas", None),
    (3, ("g-0", "g-1", "g-2"), "g-0", "Refused", "BelowMinInSyncReplicas", None),
    (1, ("g-0", "g-1", "g-2"), "g-2", "SwitchingOver", "SwitchingOver", "g-0"),
    (1, ("g-1", "g-2"), "g-2", "SwitchingOver", "SwitchingOver", "g-1"),
])
def test_a_scale_down_never_removes_the_master_nor_shrinks_the_sync_state_set_too_far(
        min_in_sync: int, sss: tuple[str, ...], master: str, step: str, reason: str,
        switchover: str | None) -> None:
    planned = plan_scale(2, 3, min_in_sync, "Retain", None, facts(master, sss))
    assert planned is not None and planned.status is not None
    assert planned.status["step"] == step and planned.status["removed"] == ["g-2"]
    assert planned.condition is not None and planned.condition[1] == reason
    assert planned.switchover_to == switchover
    if step == "Removing":
        assert (planned.status["retire"], planned.status["addresses"]) == (
            [3], ["10.0.0.3:10911"])
    assert (planned.event is not None and planned.event[0] == "Warning") == (step == "Refused")
    # The StatefulSet shrinks only once the plan says Removing.
    assert rendered_replicas(2, 3, planned.status) == (2 if step == "Removing" else 3)


def test_a_refusal_is_announced_once_and_lifted_when_the_sync_state_set_grows() -> None:
    first = plan_scale(2, 3, 2, "Retain", None, facts(sss=("g-0", "g-2")))
    assert first is not None and first.status is not None and first.event is not None
    again = plan_scale(2, 3, 2, "Retain", first.status, facts(sss=("g-0", "g-2")))
    assert again is not None and again.status is None and again.event is None
    grown = plan_scale(2, 3, 2, "Retain", first.status, facts())
    assert grown is not None and grown.status is not None and grown.status["step"] == "Removing"


def test_after_the_switchover_the_removal_goes_on() -> None:
    switching = plan_scale(2, 3, 1, "Retain", None, facts(master="g-2"))
    assert switching is not None and switching.status is not None
    waiting = plan_scale(2, 3, 1, "Retain", switching.status, facts(master="g-2"))
    assert waiting is not None and waiting.switchover_to is None and waiting.status is None
    moved = plan_scale(2, 3, 1, "Retain", switching.status, facts(master="g-0"))
    assert moved is not None and moved.status is not None
    assert moved.status["step"] == "Removing" and "switchoverTo" not in moved.status


@pytest.mark.parametrize(("reclaim", "claims"), [("Retain", ()), ("Delete", ("data-g-2",))])
def test_removed_replicas_are_retired_once_their_pods_are_gone(
        reclaim: str, claims: tuple[str, ...]) -> None:
    removing = {"step": "Removing", "to": 2, "fromReplicas": 3, "removed": ["g-2"],
                "retire": [3], "addresses": ["10.0.0.3:10911"]}
    # The reconciler built the objects for 2 already: appliedReplicas is 2.
    waiting = plan_scale(2, 2, 1, reclaim, removing, facts())
    assert waiting is not None and waiting.status is None and not waiting.retire
    done = plan_scale(2, 2, 1, reclaim, removing, facts(pods=("g-0", "g-1")))
    assert done is not None and done.status is not None and done.status["step"] == "Done"
    assert done.retire == (3,) and done.delete_claims == claims
    assert done.unregister == ("10.0.0.3:10911",)
    assert done.condition is not None and done.condition[:2] == (False, "Completed")
    assert rendered_replicas(2, 3, done.status) == 2
    # Resumed from the record alone: the same step again (its actions are idempotent).
    assert plan_scale(2, 2, 1, reclaim, removing, facts(pods=("g-0", "g-1"))) == done
    assert plan_scale(2, 3, 1, reclaim, done.status, facts(pods=("g-0", "g-1"))) is None


def test_a_scale_down_given_up_before_removal_is_cancelled() -> None:
    refused = {"step": "Refused", "to": 2, "fromReplicas": 3, "removed": ["g-2"]}
    step = plan_scale(3, 3, 2, "Retain", refused, facts())
    assert step is not None and step.status == {}
    assert step.condition is not None and step.condition[1] == "Cancelled"


def test_scale_up_shows_the_catch_up_of_new_replicas_then_completes() -> None:
    sss = ("g-0", "g-1")
    step = plan_scale(3, 2, 1, "Retain", None, facts(sss=sss, offsets={"g-0": 5000, "g-2": 1200}))
    assert step is not None and step.status is not None
    assert step.status["progress"] == "catching up: g-2 at 1200/5000"
    assert step.condition is not None and step.condition[:2] == (True, "CatchingUp")
    starting = plan_scale(3, 3, 1, "Retain", None, facts(sss=sss, offsets={"g-0": 5000}))
    assert starting is not None and starting.status is not None
    assert starting.status["progress"] == "catching up: g-2 starting"
    joined = plan_scale(3, 3, 1, "Retain", step.status, facts())
    assert joined is not None and joined.status == {}
    assert joined.condition is not None and joined.condition[:2] == (False, "Completed")
    assert plan_scale(3, 3, 1, "Retain", None, facts()) is None
    assert rendered_replicas(3, 2, None) == 3 and rendered_replicas(3, None, None) == 3


def test_async_learners_are_not_waited_for() -> None:
    step = plan_scale(3, 3, 1, "Retain", None, facts(sss=("g-0", "g-1"), learners=1))
    assert step is None
