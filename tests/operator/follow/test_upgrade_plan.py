"""Rolling upgrade planning: one table per rule; slaves first, a handover, the old master last."""

from __future__ import annotations

from typing import Any

import pytest

from mqcluster_operator.follow.election_plan import PodInfo, stuck_reason
from mqcluster_operator.follow.upgrade_plan import PAUSED_TIMEOUT, UpgradeStep, plan_upgrade
from mqcluster_operator.models import BrokerGroupSpec

SPEC = BrokerGroupSpec.model_validate({"replicas": 3, "controllerRef": {"name": "mqc"}})
DLEDGER = BrokerGroupSpec.model_validate({"mode": "DLedger", "replicas": 3,
                                          "namesrvAddr": "n:1"})
MASTER_SLAVE = BrokerGroupSpec.model_validate({"mode": "MasterSlave", "replicas": 3,
                                               "namesrvAddr": "n:1"})


def spec_with(spec: BrokerGroupSpec = SPEC, **policy: Any) -> BrokerGroupSpec:
    data = spec.model_dump(exclude_defaults=True)
    for key, value in policy.items():
        section = "upgrade" if key == "paused" else "upgradePolicy"
        data.setdefault(section, {})[key] = value
    return BrokerGroupSpec.model_validate(data)


def pods(uids: dict[str, str] | None = None, ready: bool = True,
         stuck: dict[str, str] | None = None, master: str = "bg-0") -> list[PodInfo]:
    """Labelled as the follower labels them: ``role=master`` on ``master``."""
    uids, stuck = uids or {}, stuck or {}
    return [PodInfo(f"bg-{i}", None, "master" if f"bg-{i}" == master else "slave",
                    ready and f"bg-{i}" not in stuck,
                    uids.get(f"bg-{i}", f"u{i}"), stuck=stuck.get(f"bg-{i}"))
            for i in range(3)]


def status(master: str = "bg-0", upgrade: dict[str, Any] | None = None,
           sss: tuple[str, ...] = ("bg-0", "bg-1", "bg-2")) -> dict[str, Any]:
    out: dict[str, Any] = {
        "masterPod": master,
        "syncStateSet": list(sss),
        "replicas": [{"pod": f"bg-{i}", "brokerId": i + 1, "inSync": f"bg-{i}" in sss}
                     for i in range(3)],
    }
    if upgrade is not None:
        out["upgrade"] = upgrade
    return out


OLD = {"bg-0": "r1", "bg-1": "r1", "bg-2": "r1"}
ROLLING = {"revision": "r2", "since": 100.0, "deleted": {}, "progress": "0/3 pods upgraded"}


def reason(step: UpgradeStep) -> str | None:
    return step.condition[1] if step.condition else None


def test_nothing_to_do() -> None:
    assert plan_upgrade(SPEC, "bg", "r1", pods(), OLD, status(), 0).status is None
    assert plan_upgrade(SPEC, "bg", None, pods(), OLD, status(), 0).delete is None


def test_a_missing_pod_with_nothing_outdated_starts_no_roll() -> None:
    revs = {"bg-0": "r2", "bg-1": "r2"}
    assert plan_upgrade(SPEC, "bg", "r2", pods()[:2], revs, status(), 0) == UpgradeStep()
    # but the last pod of a roll is waited for before the roll is done
    step = plan_upgrade(SPEC, "bg", "r2", pods()[:2], revs, status(upgrade=ROLLING), 1)
    assert step.condition and step.condition[:2] == (True, "Waiting")
    assert "1 pod(s) missing" in step.condition[2]


def test_full_rollout() -> None:
    step = plan_upgrade(SPEC, "bg", "r2", pods(), OLD, status(), 100)
    assert step.delete == "bg-1" and reason(step) == "RestartingSlave"
    assert step.status and step.status["progress"] == "0/3 pods upgraded"
    assert [m for _, m in step.events] == ["upgrade to revision r2 started (0/3 pods upgraded)",
                                           "upgrade: restarting slave bg-1 (0/3 pods upgraded)"]
    state = step.status
    # bg-1 not recreated yet (same uid), then recreated but out of the SyncStateSet
    assert plan_upgrade(SPEC, "bg", "r2", pods(), OLD, status(upgrade=state), 101).delete is None
    revs = {**OLD, "bg-1": "r2"}
    out_of_sync = status(upgrade=state, sss=("bg-0", "bg-2"))
    step = plan_upgrade(SPEC, "bg", "r2", pods({"bg-1": "n1"}), revs, out_of_sync, 102)
    assert step.delete is None and step.condition and "rejoin" in step.condition[2]
    step = plan_upgrade(SPEC, "bg", "r2", pods({"bg-1": "n1"}), revs, status(upgrade=state), 103)
    assert step.delete == "bg-2" and step.status
    assert step.status["progress"] == "1/3 pods upgraded"
    revs = {**revs, "bg-2": "r2"}
    now_pods = pods({"bg-1": "n1", "bg-2": "n2"})
    step = plan_upgrade(SPEC, "bg", "r2", now_pods, revs, status(upgrade=step.status), 104)
    assert step.delete is None and step.switchover_to == "bg-1" and step.transfer_to is None
    waiting = plan_upgrade(SPEC, "bg", "r2", now_pods, revs, status(upgrade=step.status), 105)
    assert waiting.switchover_to is None and waiting.delete is None
    assert reason(waiting) == "Waiting"
    switched = status(master="bg-1", upgrade=step.status)
    # the controller elected bg-1; the pods' labels (the client Service) not yet
    labels_behind = plan_upgrade(SPEC, "bg", "r2", now_pods, revs, switched, 106)
    assert labels_behind.delete is None and labels_behind.condition
    assert "client Service to select bg-1" in labels_behind.condition[2]
    now_pods = pods({"bg-1": "n1", "bg-2": "n2"}, master="bg-1")
    step = plan_upgrade(SPEC, "bg", "r2", now_pods, revs, switched, 106)
    assert step.delete == "bg-0"
    revs = {**revs, "bg-0": "r2"}
    done = plan_upgrade(SPEC, "bg", "r2",
                        pods({"bg-0": "n0", "bg-1": "n1", "bg-2": "n2"}, master="bg-1"), revs,
                        status(master="bg-1", upgrade=step.status), 107)
    assert done.status == {} and done.condition and done.condition[0] is False
    assert done.events and "completed: 3/3 pods upgraded" in done.events[0][1]


@pytest.mark.parametrize(("offsets", "max_lag", "waits_for"), [
    ({"bg-0": 1000, "bg-1": 1000, "bg-2": 1000}, 0, None),
    ({"bg-0": 1000, "bg-1": 900, "bg-2": 1000}, 0, "bg-1 100 bytes"),
    ({"bg-0": 1000, "bg-1": 900, "bg-2": 1000}, 100, None),
    ({"bg-0": 1000, "bg-1": 1100, "bg-2": 1000}, 0, None),  # read after the master
    ({"bg-0": 1000, "bg-2": 1000}, 0, "offset of bg-1"),
    ({"bg-1": 1000, "bg-2": 1000}, 0, "offset of master bg-0"),
    (None, 0, None),  # not asked: the SyncStateSet alone decides
])
def test_the_next_pod_waits_until_every_slave_has_caught_up(
        offsets: dict[str, int] | None, max_lag: int, waits_for: str | None) -> None:
    revs = {**OLD, "bg-1": "r2"}
    step = plan_upgrade(spec_with(maxLagBytes=max_lag), "bg", "r2", pods({"bg-1": "n1"}), revs,
                        status(upgrade={**ROLLING, "deleted": {"bg-1": "u1"}}), 101, offsets)
    if waits_for is None:
        assert step.delete == "bg-2"
    else:
        assert step.delete is None and reason(step) == "Waiting"
        assert step.condition and waits_for in step.condition[2]


@pytest.mark.parametrize(("spec", "ready", "sss", "master", "why"), [
    (SPEC, True, ("bg-0",), "bg-0", "SyncStateSet has 1 member(s), fewer than 2"),
    (SPEC, False, ("bg-0", "bg-1", "bg-2"), "bg-0", "not Ready"),
    (SPEC, True, ("bg-0", "bg-1", "bg-2"), None, "no master"),
    (DLEDGER, False, (), "bg-0", "not Ready"),
    (BrokerGroupSpec.model_validate({"replicas": 3, "controllerRef": {"name": "mqc"},
                                     "minInSyncReplicas": 2, "inSyncReplicas": 2}),
     True, ("bg-0", "bg-1"), "bg-0", "fewer than 3"),
])
def test_a_roll_does_not_start_while_the_group_is_degraded(
        spec: BrokerGroupSpec, ready: bool, sss: tuple[str, ...], master: str | None,
        why: str) -> None:
    group = pods(ready=ready) if ready else [*pods()[:2], PodInfo("bg-2", None, None, False, "u2")]
    step = plan_upgrade(spec, "bg", "r2", group, OLD, status(master or "", sss=sss)
                        if master else {**status(sss=sss), "masterPod": None}, 0)
    assert step.delete is None and step.switchover_to is None and step.status is None
    assert step.condition and step.condition[:2] == (False, "Degraded") and why in step.condition[2]


def test_a_roll_under_way_goes_on_while_a_pod_is_down() -> None:
    """Degraded stops only the start; a restarted slave that is slow is waited for."""
    step = plan_upgrade(SPEC, "bg", "r2", pods({"bg-1": "n1"}, ready=False),
                        {**OLD, "bg-1": "r2"}, status(upgrade={**ROLLING,
                                                               "deleted": {"bg-1": "u1"}}), 101)
    assert reason(step) == "Waiting" and step.delete is None


@pytest.mark.parametrize("why", ["CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull",
                                 "Unschedulable"])
def test_a_stuck_outdated_pod_is_replaced_first_without_waiting(why: str) -> None:
    # the group is degraded only by the stuck pod: the roll still starts, with it
    broken = pods(stuck={"bg-2": why})
    step = plan_upgrade(SPEC, "bg", "r2", broken, OLD, status(sss=("bg-0", "bg-1")), 0)
    assert step.delete == "bg-2" and reason(step) == "ReplacingStuckPod"
    assert step.status and step.status["deleted"] == {}  # not waited for
    # even while another restarted pod is still coming back, and even the master
    state = {**ROLLING, "deleted": {"bg-1": "u1"}}
    step = plan_upgrade(SPEC, "bg", "r2", pods(stuck={"bg-0": why}), OLD,
                        status(upgrade=state), 101)
    assert step.delete == "bg-0"


def test_a_stuck_upgraded_pod_is_waited_for_then_pauses_the_roll() -> None:
    revs = {**OLD, "bg-1": "r2"}
    state = {**ROLLING, "deleted": {"bg-1": "u1"}}
    broken = pods({"bg-1": "n1"}, stuck={"bg-1": "ImagePullBackOff"})
    step = plan_upgrade(SPEC, "bg", "r2", broken, revs, status(upgrade=state), 200)
    assert step.delete is None and reason(step) == "Waiting"
    paused = plan_upgrade(SPEC, "bg", "r2", broken, revs, status(upgrade=state), 100 + 601)
    assert paused.delete is None and paused.condition
    assert paused.condition[:2] == (False, PAUSED_TIMEOUT)
    assert [t for t, _ in paused.events] == ["Warning"] and paused.status
    assert paused.status["paused"] == PAUSED_TIMEOUT
    again = plan_upgrade(SPEC, "bg", "r2", broken, revs, status(upgrade=paused.status), 800)
    assert reason(again) == PAUSED_TIMEOUT and again.events == ()  # one Event per pause


def test_a_paused_roll_goes_on_once_the_step_converges() -> None:
    revs = {**OLD, "bg-1": "r2"}
    state = {**ROLLING, "deleted": {"bg-1": "u1"}, "paused": PAUSED_TIMEOUT}
    step = plan_upgrade(SPEC, "bg", "r2", pods({"bg-1": "n1"}), revs, status(upgrade=state), 900)
    assert step.delete == "bg-2" and step.status and "paused" not in step.status
    assert reason(step) == "RestartingSlave"


def test_resume_gives_the_step_a_new_timeout() -> None:
    revs = {**OLD, "bg-1": "r2"}
    state = {**ROLLING, "deleted": {"bg-1": "u1"}, "paused": PAUSED_TIMEOUT}
    broken = pods({"bg-1": "n1"}, ready=False)
    step = plan_upgrade(SPEC, "bg", "r2", broken, revs, status(upgrade=state), 900, resume=True)
    assert step.clear_resume and reason(step) == "Waiting"
    assert step.status and step.status["since"] == 900 and "paused" not in step.status


def test_resume_asks_for_a_handover_that_never_happened_again() -> None:
    revs = {"bg-0": "r1", "bg-1": "r2", "bg-2": "r2"}
    state = {**ROLLING, "switchoverTo": "bg-2", "paused": PAUSED_TIMEOUT}
    step = plan_upgrade(SPEC, "bg", "r2", pods(), revs, status(upgrade=state), 900, resume=True)
    assert step.switchover_to == "bg-1" and step.clear_resume


def test_spec_upgrade_paused_holds_the_roll() -> None:
    held = spec_with(paused=True)
    step = plan_upgrade(held, "bg", "r2", pods(), OLD, status(), 0)
    assert step.delete is None and step.status is None
    assert step.condition and step.condition[:2] == (False, "PausedByUser")
    under_way = plan_upgrade(held, "bg", "r2", pods({"bg-1": "n1"}), {**OLD, "bg-1": "r2"},
                             status(upgrade=ROLLING), 1000)
    assert under_way.delete is None and reason(under_way) == "PausedByUser"
    assert under_way.status and under_way.status["progress"] == "1/3 pods upgraded"
    assert under_way.condition and "1/3 pods upgraded" in under_way.condition[2]


def test_switchover_that_does_not_happen_pauses() -> None:
    revs = {"bg-0": "r1", "bg-1": "r2", "bg-2": "r2"}
    state = {**ROLLING, "switchoverTo": "bg-1"}
    late = plan_upgrade(SPEC, "bg", "r2", pods(), revs, status(upgrade=state), 100 + 121)
    assert late.condition and late.condition[:2] == (False, PAUSED_TIMEOUT)
    assert "waiting for bg-1 to become master" in late.condition[2]


def test_dledger_transfers_leadership_to_an_upgraded_follower_before_the_leader_goes() -> None:
    revs = {"bg-0": "r1", "bg-1": "r2", "bg-2": "r2"}
    step = plan_upgrade(DLEDGER, "bg", "r2", pods(), revs, status(sss=()), 0,
                        {"bg-0": 10, "bg-1": 10, "bg-2": 10})
    assert step.transfer_to == "bg-1" and step.switchover_to is None and step.delete is None
    assert step.status and step.status["transferTo"] == "bg-1"
    waiting = plan_upgrade(DLEDGER, "bg", "r2", pods(), revs,
                           status(upgrade=step.status, sss=()), 1)
    assert waiting.transfer_to is None and waiting.delete is None
    moved = plan_upgrade(DLEDGER, "bg", "r2", pods(master="bg-1"), revs,
                         status("bg-1", upgrade=step.status, sss=()), 2)
    assert moved.delete == "bg-0" and moved.status and "transferTo" not in moved.status


def test_dledger_waits_for_a_lagging_follower_before_the_transfer() -> None:
    revs = {"bg-0": "r1", "bg-1": "r2", "bg-2": "r2"}
    step = plan_upgrade(DLEDGER, "bg", "r2", pods(), revs, status(sss=()), 0,
                        {"bg-0": 10, "bg-1": 5, "bg-2": 10})
    assert step.transfer_to is None and step.condition and "bg-1 5 bytes" in step.condition[2]


def test_manual_strategy_only_reports() -> None:
    step = plan_upgrade(spec_with(strategy="Manual"), "bg", "r2", pods(), OLD, status(), 0)
    assert step.delete is None and reason(step) == "ManualUpgrade"


def test_master_slave_restarts_the_master_last_without_switchover() -> None:
    revs = {"bg-0": "r1", "bg-1": "r2", "bg-2": "r2"}
    step = plan_upgrade(MASTER_SLAVE, "bg", "r2", pods(), revs, status(), 0)
    assert step.delete == "bg-0" and step.switchover_to is None and step.transfer_to is None


def test_learners_are_not_switchover_targets() -> None:
    spec = BrokerGroupSpec.model_validate({"replicas": 3, "controllerRef": {"name": "mqc"},
                                           "asyncLearnerReplicas": 1})
    revs = {"bg-0": "r1", "bg-1": "r2", "bg-2": "r2"}
    step = plan_upgrade(spec, "bg", "r2", pods(), revs, status(sss=("bg-0", "bg-1")), 0)
    assert step.switchover_to == "bg-1"


def test_a_new_revision_during_a_roll_carries_on_without_the_degraded_check() -> None:
    """A fixed image while a broken one was rolling: the group is weak, the roll goes on."""
    state = {**ROLLING, "revision": "r2", "deleted": {"bg-1": "u1"}}
    broken = pods({"bg-1": "n1"}, stuck={"bg-1": "ImagePullBackOff"})
    revs = {**OLD, "bg-1": "r2"}
    step = plan_upgrade(SPEC, "bg", "r3", broken, revs, status(upgrade=state,
                                                               sss=("bg-0", "bg-2")), 200)
    assert step.delete == "bg-1" and reason(step) == "ReplacingStuckPod"
    assert step.status and step.status["revision"] == "r3"


@pytest.mark.parametrize(("pod_status", "stuck"), [
    ({"phase": "Running", "containerStatuses": [
        {"state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}, "CrashLoopBackOff"),
    ({"phase": "Pending", "containerStatuses": [
        {"state": {"waiting": {"reason": "ImagePullBackOff"}}}]}, "ImagePullBackOff"),
    ({"phase": "Pending", "containerStatuses": [
        {"state": {"waiting": {"reason": "ContainerCreating"}}}]}, None),
    ({"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
     "Unschedulable"),
    ({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}, None),
])
def test_pods_that_cannot_serve_are_recognised(pod_status: dict[str, Any],
                                               stuck: str | None) -> None:
    assert stuck_reason(pod_status) == stuck
    pod = PodInfo.of({"metadata": {"name": "bg-0"}, "status": pod_status})
    assert pod.stuck == stuck


def test_a_handover_that_has_not_happened_is_asked_for_again_until_the_timeout() -> None:
    revs = {"bg-0": "r1", "bg-1": "r2", "bg-2": "r2"}
    first = plan_upgrade(DLEDGER, "bg", "r2", pods(), revs, status(sss=()), 100,
                         {"bg-0": 10, "bg-1": 10, "bg-2": 10})
    assert first.transfer_to == "bg-1" and first.status
    assert first.status["askedAt"] == 100
    soon = plan_upgrade(DLEDGER, "bg", "r2", pods(), revs,
                        status(upgrade=first.status, sss=()), 105)
    assert soon.transfer_to is None and reason(soon) == "Waiting"
    again = plan_upgrade(DLEDGER, "bg", "r2", pods(), revs,
                         status(upgrade=first.status, sss=()), 111)
    assert again.transfer_to == "bg-1" and again.delete is None and again.events == ()
    assert again.status and again.status["askedAt"] == 111 and again.status["since"] == 100
    late = plan_upgrade(DLEDGER, "bg", "r2", pods(), revs,
                        status(upgrade=again.status, sss=()), 100 + 121)
    assert late.transfer_to is None and reason(late) == PAUSED_TIMEOUT
    # controller mode asks the controller again the same way
    switch = plan_upgrade(SPEC, "bg", "r2", pods(), revs,
                          status(upgrade={**ROLLING, "switchoverTo": "bg-1", "askedAt": 100.0}),
                          111)
    assert switch.switchover_to == "bg-1" and switch.transfer_to is None


def test_a_roll_is_finished_only_once_the_last_restarted_pod_is_ready() -> None:
    """Every pod at the new revision is not enough: the old master, restarted last, must be
    back (a new uid) and Ready before Upgrading turns False/UpToDate."""
    revs = {"bg-0": "r2", "bg-1": "r2", "bg-2": "r2"}
    state = {**ROLLING, "deleted": {"bg-0": "u0"}}
    uids = {"bg-0": "n0", "bg-1": "n1", "bg-2": "n2"}
    recreated_not_ready = [PodInfo("bg-0", None, "slave", False, "n0"),
                           *pods(uids, master="bg-1")[1:]]
    step = plan_upgrade(SPEC, "bg", "r2", recreated_not_ready, revs,
                        status(master="bg-1", upgrade=state), 107)
    assert step.condition and step.condition[:2] == (True, "Waiting")
    assert "bg-0 to be Ready" in step.condition[2] and not step.events
    assert step.status and step.status["revision"] == "r2"
    # the old pod (same uid) still listed: not recreated yet
    step = plan_upgrade(SPEC, "bg", "r2", pods({**uids, "bg-0": "u0"}, master="bg-1"), revs,
                        status(master="bg-1", upgrade=state), 107)
    assert step.condition and "bg-0 to be recreated" in step.condition[2]
    done = plan_upgrade(SPEC, "bg", "r2", pods(uids, master="bg-1"), revs,
                        status(master="bg-1", upgrade=state), 108)
    assert done.status == {} and done.condition and done.condition[:2] == (False, "UpToDate")
