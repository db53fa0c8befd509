"""Pure planners: following, restart, conditions, reconcile outcomes, apply diffs."""

from __future__ import annotations

from typing import Any

from mqcluster_operator import conditions, names
from mqcluster_operator.events import build_event
from mqcluster_operator.follow.election_plan import (
    Election,
    PodInfo,
    ReplicaState,
    plan_follow,
    pod_for_address,
    switchover_target,
)
from mqcluster_operator.follow.restart_plan import plan_restart
from mqcluster_operator.k8s import Ref, differs
from mqcluster_operator.reconcile import plan_brokergroup, plan_controller, readiness

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


def test_conditions_keep_transition_time() -> None:
    conds = conditions.set_condition([], "Ready", False, "A", "m", NOW)
    same = conditions.set_condition(conds, "Ready", False, "B", "n", LATER)
    assert same[0]["lastTransitionTime"] == NOW and same[0]["reason"] == "B"
    flipped = conditions.set_condition(same, "Ready", True, "C", "", LATER, 4)
    assert flipped[0]["lastTransitionTime"] == LATER and flipped[0]["observedGeneration"] == 4
    both = conditions.set_condition(flipped, "Degraded", None, "D", "", LATER)
    assert [c["type"] for c in both] == ["Ready", "Degraded"] and both[1]["status"] == "Unknown"


def test_restart_goes_slaves_first_and_waits_for_each_pod() -> None:
    ps = pods("slave", "master", "slave")
    step = plan_restart("r1", None, ps, 3, "bg-1")
    assert step.delete is None and step.status == {
        "requested": "r1", "pending": ["bg-0", "bg-2", "bg-1"], "deleted": {}}
    step = plan_restart("r1", step.status, ps, 3, "bg-1")
    assert step.delete == "bg-0"
    state = step.status
    assert plan_restart("r1", state, ps, 3, "bg-1").delete is None  # same uid: not recreated
    assert plan_restart("r1", state, ps[1:], 3, "bg-1").delete is None  # pod missing
    back = [PodInfo("bg-0", None, "slave", False, "new"), *ps[1:]]
    assert plan_restart("r1", state, back, 3, "bg-1").delete is None  # not ready yet
    back = [PodInfo("bg-0", None, "slave", True, "new"), *ps[1:]]
    step = plan_restart("r1", state, back, 3, "bg-1")
    assert step.delete == "bg-2"
    back = [back[0], back[1], PodInfo("bg-2", None, "slave", True, "new2")]
    step = plan_restart("r1", step.status, back, 3, "bg-1")
    assert step.delete == "bg-1"
    done_pods = [back[0], PodInfo("bg-1", None, "slave", True, "new1"), back[2]]
    step = plan_restart("r1", step.status, done_pods, 3, "bg-0")
    assert step.done and step.status == {"completed": "r1"}
    assert plan_restart("r1", step.status, done_pods, 3, "bg-0").status is None


def body(kind: str, spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "mqcluster.io/v1alpha1", "kind": kind,
        "metadata": {"name": "x", "namespace": "mq", "uid": "u", "generation": 2, **meta},
        "spec": spec,
    }


def test_reconcile_controller() -> None:
    outcome = plan_controller(body("Controller", {}), NOW)
    assert [o["kind"] for o in outcome.objects] == [
        "ConfigMap", "Service", "StatefulSet", "PodDisruptionBudget"]
    assert outcome.status == {"observedGeneration": 2} and outcome.statefulset == "x"


def test_reconcile_invalid_spec_reports_once() -> None:
    bad = body("BrokerGroup", {"mode": "DLedger", "replicas": 1, "namesrvAddr": "n:1"})
    outcome = plan_brokergroup(bad, None, NOW)
    assert outcome.objects == []
    assert outcome.status["phase"] == "Failed"
    ready = outcome.status["conditions"][0]
    assert ready["reason"] == "InvalidSpec" and "at least 3 replicas" in ready["message"]
    assert outcome.event is not None and outcome.event[:2] == ("Warning", "InvalidSpec")
    again = plan_brokergroup({**bad, "status": outcome.status}, None, LATER)
    assert again.event is None


def test_reconcile_brokergroup_needs_its_controller() -> None:
    bg = body("BrokerGroup", {"controllerRef": {"name": "mqc"}})
    outcome = plan_brokergroup(bg, None, NOW)
    assert outcome.status["conditions"][0]["reason"] == "ControllerNotFound"
    controller = body("Controller", {"deployment": "EmbeddedInNamesrv"}, name="mqc")
    outcome = plan_brokergroup(bg, controller, NOW)
    assert len(outcome.objects) == 6 and outcome.event is None
    no_namesrv = plan_brokergroup(bg, body("Controller", {}, name="mqc"), NOW)
    assert no_namesrv.status["conditions"][0]["reason"] == "InvalidSpec"


def test_reconcile_paused() -> None:
    bg = body("BrokerGroup", {}, annotations={names.ANNOTATION_PAUSE: "true"})
    outcome = plan_brokergroup(bg, None, NOW)
    assert outcome.objects == [] and outcome.status["phase"] == "Paused" and outcome.event is None


def test_readiness() -> None:
    bg = body("BrokerGroup", {"replicas": 2})
    sts = {"status": {"readyReplicas": 2}}
    assert readiness(bg, sts, NOW, needs_master=True)["phase"] == "Degraded"
    bg["status"] = {"masterPod": "x-0"}
    ready = readiness(bg, sts, NOW, needs_master=True)
    assert ready["phase"] == "Running" and ready["conditions"][0]["status"] == "True"
    assert readiness(bg, None, NOW, needs_master=True)["phase"] == "Pending"


def test_ref_paths() -> None:
    desired: dict[str, Any] = {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "mq"},
    }
    assert Ref.of(desired).path() == "/api/v1/namespaces/mq/configmaps/c"
    assert Ref("apps/v1", "StatefulSet", "mq", "s").path("status") == (
        "/apis/apps/v1/namespaces/mq/statefulsets/s/status")


def test_event() -> None:
    event = build_event(body("BrokerGroup", {}), "Normal", "MasterChanged", "m", NOW)
    assert event["involvedObject"] == {
        "apiVersion": "mqcluster.io/v1alpha1", "kind": "BrokerGroup", "name": "x",
        "namespace": "mq", "uid": "u"}
    assert event["metadata"]["name"].startswith("x.") and event["reason"] == "MasterChanged"


def test_mode_and_name_changes_are_refused_against_what_was_applied() -> None:
    spec = {"mode": "DLedger", "replicas": 3, "namesrvAddr": "n:1"}
    applied = plan_brokergroup(body("BrokerGroup", spec), None, NOW)
    assert applied.status["appliedMode"] == "DLedger" and applied.status["appliedBrokerName"] == "x"
    status = applied.status
    to_ms = plan_brokergroup(
        {**body("BrokerGroup", {**spec, "mode": "MasterSlave"}), "status": status}, None, NOW)
    assert to_ms.objects == [] and to_ms.status["conditions"][0]["reason"] == "InvalidSpec"
    controller = body("Controller", {"deployment": "EmbeddedInNamesrv"}, name="mqc")
    migrate = {**spec, "mode": "Controller", "controllerRef": {"name": "mqc"}}
    to_ctl = plan_brokergroup({**body("BrokerGroup", migrate), "status": status}, controller, NOW)
    assert to_ctl.status["appliedMode"] == "DLedger"  # until the migration clears the stores
    renamed = plan_brokergroup(
        {**body("BrokerGroup", {**spec, "brokerName": "y"}), "status": status}, None, NOW)
    assert "brokerName is immutable" in renamed.status["conditions"][0]["message"]


def test_a_migration_renders_dledger_then_no_pods_then_controller_mode_clearing_stores() -> None:
    spec = {"mode": "Controller", "replicas": 3, "controllerRef": {"name": "mqc"}}
    controller = body("Controller", {"deployment": "EmbeddedInNamesrv"}, name="mqc")

    def planned(migration: dict[str, Any] | None) -> tuple[str, dict[str, Any], str]:
        status = {"appliedMode": "DLedger", "appliedBrokerName": "x", "migration": migration}
        out = plan_brokergroup({**body("BrokerGroup", spec), "status": status}, controller, NOW)
        sts = next(o for o in out.objects if o["kind"] == "StatefulSet")
        conf = next(o for o in out.objects if o["kind"] == "ConfigMap")["data"]["broker.conf"]
        return out.status["appliedMode"], sts["spec"], conf

    mode, sts, conf = planned({"step": "Draining", "id": "m7"})
    assert mode == "DLedger" and sts["replicas"] == 3 and "enableDLegerCommitLog=true" in conf
    assert "initContainers" not in sts["template"]["spec"]
    mode, sts, conf = planned({"step": "Stopping", "id": "m7"})
    assert mode == "DLedger" and sts["replicas"] == 0
    for step in ("Restarting", "Done"):
        mode, sts, conf = planned({"step": step, "id": "m7"})
        assert mode == "Controller" and sts["replicas"] == 3
        assert "enableControllerMode=true" in conf and "enableDLegerCommitLog" not in conf
        init = sts["template"]["spec"]["initContainers"]
        assert [c["name"] for c in init] == ["clear-store"]
        assert init[0]["command"][:3] == ["python", "-m", "mqcluster.store.clear"]
        assert "m7" in init[0]["command"] and "config/topics.json" in init[0]["command"]


def test_prestop_identity_and_successor() -> None:
    from mqcluster.broker.prestop import identity, successor

    props = {
        "enableControllerMode": "true", "controllerAddr": "c0:9878;c1:9878",
        "brokerClusterName": "C", "brokerName": "bg", "brokerIP1": "bg-0.h", "listenPort": "10911",
    }
    me = identity(props)
    assert me is not None and me.address == "bg-0.h:10911"
    assert me.controller_addrs == ("c0:9878", "c1:9878")
    assert identity({**props, "enableControllerMode": "false"}) is None
    replicas = [
        ReplicaState(1, "bg-0.h:10911", True, True),
        ReplicaState(3, "bg-2.h:10911", True, True),
        ReplicaState(2, "bg-1.h:10911", False, True),
        ReplicaState(4, "bg-3.h:10911", True, False),
    ]
    assert successor("bg-0.h:10911", "bg-0.h:10911", replicas) == 3
    assert successor("bg-2.h:10911", "bg-0.h:10911", replicas) is None
    assert successor("bg-0.h:10911", "bg-0.h:10911", replicas[:1]) is None
