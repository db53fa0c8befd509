"""Rolling upgrade planning: slaves first, switchover, old master last."""

from __future__ import annotations

from typing import Any

from mqcluster_operator.election_plan import PodInfo
from mqcluster_operator.models import BrokerGroupSpec
from mqcluster_operator.upgrade import plan_upgrade

SPEC = BrokerGroupSpec.model_validate({"replicas": 3, "controllerRef": {"name": "mqc"}})


def pods(uids: dict[str, str] | None = None, ready: bool = True) -> list[PodInfo]:
    uids = uids or {}
    return [PodInfo(f"bg-{i}", None, None, ready, uids.get(f"bg-{i}", f"u{i}")) for i in range(3)]


def status(master: str = "bg-0", upgrade: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "masterPod": master,
        "syncStateSet": ["bg-0", "bg-1", "bg-2"],
        "replicas": [{"pod": f"bg-{i}", "brokerId": i + 1, "inSync": True} for i in range(3)],
    }
    if upgrade is not None:
        out["upgrade"] = upgrade
    return out


OLD = {"bg-0": "r1", "bg-1": "r1", "bg-2": "r1"}


def test_nothing_to_do() -> None:
    assert plan_upgrade(SPEC, "bg", "r1", pods(), OLD, status(), 0).status is None
    assert plan_upgrade(SPEC, "bg", None, pods(), OLD, status(), 0).delete is None


def test_full_rollout() -> None:
    step = plan_upgrade(SPEC, "bg", "r2", pods(), OLD, status(), 100)
    assert step.delete == "bg-1" and step.condition and step.condition[1] == "RestartingSlave"
    state = step.status
    # bg-1 not recreated yet (same uid), then recreated but out of the SyncStateSet
    assert plan_upgrade(SPEC, "bg", "r2", pods(), OLD, status(upgrade=state), 101).delete is None
    revs = {**OLD, "bg-1": "r2"}
    out_of_sync = status(upgrade=state)
    out_of_sync["syncStateSet"] = ["bg-0", "bg-2"]
    step = plan_upgrade(SPEC, "bg", "r2", pods({"bg-1": "n1"}), revs, out_of_sync, 102)
    assert step.delete is None and step.condition and "rejoin" in step.condition[2]
    step = plan_upgrade(SPEC, "bg", "r2", pods({"bg-1": "n1"}), revs, status(upgrade=state), 103)
    assert step.delete == "bg-2"
    revs = {**revs, "bg-2": "r2"}
    now_pods = pods({"bg-1": "n1", "bg-2": "n2"})
    step = plan_upgrade(SPEC, "bg", "r2", now_pods, revs, status(upgrade=step.status), 104)
    assert step.delete is None and step.switchover_to == "bg-1"
    waiting = plan_upgrade(SPEC, "bg", "r2", now_pods, revs, status(upgrade=step.status), 105)
    assert waiting.switchover_to is None and waiting.delete is None
    assert waiting.condition and waiting.condition[1] == "Waiting"
    late = plan_upgrade(SPEC, "bg", "r2", now_pods, revs, status(upgrade=step.status), 104 + 500)
    assert late.condition and late.condition[1] == "Stalled"
    step = plan_upgrade(SPEC, "bg", "r2", now_pods, revs,
                        status(master="bg-1", upgrade=step.status), 106)
    assert step.delete == "bg-0"
    revs = {**revs, "bg-0": "r2"}
    done = plan_upgrade(SPEC, "bg", "r2", pods({"bg-0": "n0", "bg-1": "n1", "bg-2": "n2"}), revs,
                        status(master="bg-1", upgrade=step.status), 107)
    assert done.status == {} and done.condition and done.condition[0] is False


def test_manual_strategy_only_reports() -> None:
    manual = SPEC.model_copy(update={"upgradePolicy": SPEC.upgradePolicy.model_copy(
        update={"strategy": "Manual"})})
    step = plan_upgrade(manual, "bg", "r2", pods(), OLD, status(), 0)
    assert step.delete is None and step.condition and step.condition[1] == "ManualUpgrade"


def test_master_slave_restarts_the_master_last_without_switchover() -> None:
    spec = BrokerGroupSpec.model_validate({"mode": "MasterSlave", "replicas": 3,
                                           "namesrvAddr": "n:1"})
    revs = {"bg-0": "r1", "bg-1": "r2", "bg-2": "r2"}
    step = plan_upgrade(spec, "bg", "r2", pods(), revs, status(), 0)
    assert step.delete == "bg-0" and step.switchover_to is None


def test_learners_are_not_switchover_targets() -> None:
    spec = BrokerGroupSpec.model_validate({"replicas": 3, "controllerRef": {"name": "mqc"},
                                           "asyncLearnerReplicas": 1})
    revs = {"bg-0": "r1", "bg-1": "r2", "bg-2": "r2"}
    st = status()
    st["syncStateSet"] = ["bg-0", "bg-1"]
    step = plan_upgrade(spec, "bg", "r2", pods(), revs, st, 0)
    assert step.switchover_to == "bg-1"
