"""Pure planners: conditions, reconcile outcomes, apply diffs (the followers' planners
are tested in tests/operator/follow)."""

from __future__ import annotations

from typing import Any

from mqcluster.protocol.election import ReplicaState
from mqcluster_operator import conditions, names
from mqcluster_operator.events import build_event
from mqcluster_operator.k8s import Ref
from mqcluster_operator.reconcile import plan_brokergroup, plan_controller, readiness

NOW = "2026-01-01T00:00:00Z"
LATER = "2026-01-01T00:01:00Z"


def test_conditions_keep_transition_time() -> None:
    conds = conditions.set_condition([], "Ready", False, "A", "m", NOW)
    same = conditions.set_condition(conds, "Ready", False, "B", "n", LATER)
    assert same[0]["lastTransitionTime"] == NOW and same[0]["reason"] == "B"
    flipped = conditions.set_condition(same, "Ready", True, "C", "", LATER, 4)
    assert flipped[0]["lastTransitionTime"] == LATER and flipped[0]["observedGeneration"] == 4
    both = conditions.set_condition(flipped, "Degraded", None, "D", "", LATER)
    assert [c["type"] for c in both] == ["Ready", "Degraded"] and both[1]["status"] == "Unknown"


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
