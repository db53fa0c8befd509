"""Following the election, as pure planning: who is master, the relabels, the status and
the event; the switchover target."""

from __future__ import annotations

from typing import Any

from mqcluster.protocol.election import Election, ReplicaState
from mqcluster_operator import conditions
from mqcluster_operator.follow.election_plan import (
    PodInfo,
    plan_follow,
    pod_for_address,
    switchover_target,
)
from mqcluster_operator.k8s import differs

NOW = "2026-01-01T00:00:00Z"
LATER = "2026-01-01T00:01:00Z"


def pods(*roles: str | None) -> list[PodInfo]:
    return [
        PodInfo(f"bg-{i}", f"10.0.0.{i}", role, True, f"uid-{i}") for i, role in enumerate(roles)
    ]


def addr(i: int) -> str:
    return f"bg-{i}.bg-headless.mq.svc:10911"


def test_pod_for_address() -> None:
    ps = pods(None, None)
    assert pod_for_address(addr(1), ps) == "bg-1"
    assert pod_for_address("10.0.0.0:10911", ps) == "bg-0"
    assert pod_for_address("other-0.x:1", ps) is None
    assert pod_for_address(None, ps) is None


def test_first_election_labels_master_and_slaves() -> None:
    election = Election(addr(1), 3, 5, (
        ReplicaState(0, addr(1), True, True), ReplicaState(2, addr(0), True, False)))
    plan = plan_follow({}, election, pods(None, None), NOW)
    assert plan.master_pod == "bg-1"
    assert plan.relabels == (("bg-0", "slave"), ("bg-1", "master"))
    assert plan.status["masterEpoch"] == 3 and plan.status["syncStateSetEpoch"] == 5
    assert plan.status["syncStateSet"] == ["bg-1"]
    assert plan.status["replicas"][1] == {
        "pod": "bg-0", "brokerId": 2, "address": addr(0), "role": "slave", "inSync": False,
        "alive": True,
    }
    assert plan.event == ("Normal", "MasterChanged", "master changed from none to bg-1 (epoch 3)")


def test_failover_demotes_before_promoting() -> None:
    status = {"masterPod": "bg-1", "masterEpoch": 3}
    plan = plan_follow(status, Election(addr(0), 4), pods("slave", "master"), NOW)
    assert plan.relabels == (("bg-1", "slave"), ("bg-0", "master"))
    assert plan.event is not None and "from bg-1 to bg-0 (epoch 4)" in plan.event[2]


def test_steady_state_changes_nothing() -> None:
    first = plan_follow({}, Election(addr(0), 1), pods(None, None), NOW)
    again = plan_follow(first.status, Election(addr(0), 1), pods("master", "slave"), LATER)
    assert again.relabels == () and again.event is None and not again.changed
    assert not differs(again.status, first.status)


def test_reelection_of_the_same_pod_is_a_master_change() -> None:
    status = {"masterPod": "bg-0", "masterEpoch": 1}
    plan = plan_follow(status, Election(addr(0), 2), pods("master"), NOW)
    assert plan.changed and plan.relabels == ()
    assert plan.event is not None and "epoch 2" in plan.event[2]


def test_lost_master_demotes_everyone() -> None:
    status = {"masterPod": "bg-0", "masterEpoch": 1}
    plan = plan_follow(status, Election(None), pods("master", "slave"), NOW)
    assert plan.relabels == (("bg-0", "slave"),)
    assert plan.event is not None and plan.event[0] == "Warning"
    cond = conditions.get_condition(plan.status["conditions"], "MasterElected")
    assert cond is not None and cond["status"] == "False" and cond["reason"] == "NoMaster"


def test_master_outside_the_group() -> None:
    plan = plan_follow({}, Election("elsewhere-0.x:1", 1), pods(None), NOW)
    assert plan.master_pod is None
    cond = conditions.get_condition(plan.status["conditions"], "MasterElected")
    assert cond is not None and "not a pod of this group" in cond["message"]


def test_switchover_target() -> None:
    status: dict[str, Any] = {"masterPod": "bg-0", "replicas": [
        {"pod": "bg-0", "brokerId": 0, "inSync": True},
        {"pod": "bg-1", "brokerId": 2, "inSync": True},
        {"pod": "bg-2", "brokerId": 3, "inSync": False},
    ]}
    assert switchover_target("bg-1", status) == (2, None)
    assert switchover_target("bg-0", status)[1] == "bg-0 is already the master"
    assert "not in the SyncStateSet" in str(switchover_target("bg-2", status)[1])
    assert "not a replica" in str(switchover_target("bg-9", status)[1])
