from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from mqcluster_operator import names
from mqcluster_operator.manifests import (
    Owner,
    SpecError,
    build_brokergroup,
    build_controller,
    controller_view,
)
from mqcluster_operator.models import BrokerGroupSpec, ControllerSpec

from .golden_io import check_golden

K8S_VERSION = "1.33"
NS = "mq"

MQC = ControllerSpec.model_validate({"replicas": 3})
MQC_VIEW = controller_view("mqc", NS, MQC)
NAMESRV = ControllerSpec.model_validate({"deployment": "EmbeddedInNamesrv"})
NAMESRV_VIEW = controller_view("namesrv", NS, NAMESRV)


def owner(kind: str, name: str) -> Owner:
    return Owner(kind=kind, name=name, namespace=NS, uid=f"uid-{name}")


CONTROLLER_CASES: dict[str, dict[str, Any]] = {
    "controller-standalone": {},
    "controller-embedded": {
        "deployment": "EmbeddedInNamesrv",
        "replicas": 5,
        "image": "registry.local/mqcluster/broker:0.2.0",
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
        "storage": {"size": "2Gi", "storageClassName": "fast"},
        "config": {"enableElectUncleanMaster": "false"},
        "scheduling": {
            "podAntiAffinity": "Required",
            "nodeSelector": {"pool": "mq"},
            "tolerations": [{"key": "mq", "operator": "Exists", "effect": "NoSchedule"}],
        },
        "podAnnotations": {"prometheus.io/scrape": "true"},
        "podLabels": {"team": "messaging"},
    },
}

BROKER_CASES: dict[str, tuple[dict[str, Any], Any]] = {
    "brokergroup-controller": (
        {
            "controllerRef": {"name": "namesrv"},
            "replicas": 3,
            "allAckInSyncStateSet": True,
            "inSyncReplicas": 2,
            "asyncLearnerReplicas": 1,
            "brokerConfig": {"flushDiskType": "ASYNC_FLUSH"},
        },
        NAMESRV_VIEW,
    ),
    "brokergroup-dledger": (
        {"mode": "DLedger", "replicas": 3, "namesrvAddr": "ns-0.ns:9876", "brokerName": "b"},
        None,
    ),
    "brokergroup-masterslave": (
        {
            "mode": "MasterSlave",
            "replicas": 2,
            "inSyncReplicas": 2,
            "namesrvAddr": "ns:9876",
            "service": {
                "type": "NodePort",
                "grpcNodePort": 30081,
                "annotations": {"example.com/lb": "internal"},
            },
            "scheduling": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["a"]}
                                ]}
                            ]
                        }
                    }
                },
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": {"app.kubernetes.io/instance": "ms"}},
                    }
                ],
                "priorityClassName": "mq-critical",
            },
            "resources": {"limits": {"memory": "2Gi"}},
        },
        None,
    ),
}


def built_controller(case: str) -> list[dict[str, Any]]:
    return build_controller(owner("Controller", case), ControllerSpec.model_validate(
        CONTROLLER_CASES[case]))


def built_broker(case: str) -> list[dict[str, Any]]:
    spec, view = BROKER_CASES[case]
    return build_brokergroup(owner("BrokerGroup", case), BrokerGroupSpec.model_validate(spec), view)


ALL = [(c, built_controller) for c in CONTROLLER_CASES] + [(c, built_broker) for c in BROKER_CASES]


@pytest.mark.parametrize(("case", "build"), ALL, ids=[c for c, _ in ALL])
def test_golden(case: str, build: Any) -> None:
    check_golden(case, build(case))


@pytest.mark.parametrize(("case", "build"), ALL, ids=[c for c, _ in ALL])
def test_objects_validate_against_kubernetes_schemas(case: str, build: Any) -> None:
    for obj in build(case):
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def by_kind(objs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objs}


def test_controller_objects() -> None:
    objs = by_kind(built_controller("controller-standalone"))
    assert set(objs) == {
        ("ConfigMap", "controller-standalone-config"),
        ("Service", "controller-standalone-headless"),
        ("StatefulSet", "controller-standalone"),
        ("PodDisruptionBudget", "controller-standalone"),
    }
    conf = objs["ConfigMap", "controller-standalone-config"]["data"]["controller.conf"]
    assert "controllerDLegerPeers=n0-controller-standalone-0.controller-standalone-headless" in conf
    assert "listenPort=9878" in conf and ":9878;" in conf
    sts = objs["StatefulSet", "controller-standalone"]
    assert sts["spec"]["replicas"] == 3
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    assert "mqcontroller" in sts["spec"]["template"]["spec"]["containers"][0]["command"][-1]


def test_embedded_controller_runs_namesrv() -> None:
    objs = by_kind(built_controller("controller-embedded"))
    data = objs["ConfigMap", "controller-embedded-config"]["data"]
    assert "enableControllerInNamesrv=true" in data["namesrv.conf"]
    assert "listenPort=9876" in data["namesrv.conf"]
    assert data["pod-4.conf"] == "controllerDLegerSelfId=n4\n"
    assert NAMESRV_VIEW.namesrv_addr_value() == ";".join(
        f"namesrv-{i}.namesrv-headless.mq.svc:9876" for i in range(3)
    )
    assert NAMESRV_VIEW.controller_addr_value() == ";".join(
        f"namesrv-{i}.namesrv-headless.mq.svc:9878" for i in range(3)
    )
    assert MQC_VIEW.namesrv_addr_value() is None


def test_controller_mode_broker_config() -> None:
    objs = by_kind(built_broker("brokergroup-controller"))
    data = objs["ConfigMap", "brokergroup-controller-config"]["data"]
    conf = data["broker.conf"]
    assert "enableControllerMode=true" in conf
    assert f"controllerAddr={NAMESRV_VIEW.controller_addr_value()}" in conf
    assert f"namesrvAddr={NAMESRV_VIEW.namesrv_addr_value()}" in conf
    assert "allAckInSyncStateSet=true" in conf and "inSyncReplicas=2" in conf
    assert "brokerId" not in conf and "brokerRole" not in conf
    assert "asyncLearner=false" in data["pod-1.conf"]
    assert "asyncLearner=true" in data["pod-2.conf"]


def test_dledger_broker_config() -> None:
    data = by_kind(built_broker("brokergroup-dledger"))["ConfigMap", "brokergroup-dledger-config"]
    conf = data["data"]["broker.conf"]
    peers = ";".join(
        f"n{i}-brokergroup-dledger-{i}.brokergroup-dledger-headless.mq.svc:40911" for i in range(3)
    )
    assert f"dLegerPeers={peers}" in conf
    assert "dLegerGroup=b" in conf and "enableDLegerCommitLog=true" in conf
    assert "dLegerSelfId=n2" in data["data"]["pod-2.conf"]


def test_master_slave_broker_config() -> None:
    data = by_kind(built_broker("brokergroup-masterslave"))
    pods = data["ConfigMap", "brokergroup-masterslave-config"]["data"]
    assert "brokerId=0\nbrokerRole=SYNC_MASTER" in pods["pod-0.conf"]
    assert "brokerId=1\nbrokerRole=SLAVE" in pods["pod-1.conf"]


def test_broker_statefulset() -> None:
    sts = by_kind(built_broker("brokergroup-controller"))["StatefulSet", "brokergroup-controller"]
    spec = sts["spec"]
    assert spec["updateStrategy"] == {"type": "OnDelete"}
    assert spec["serviceName"] == "brokergroup-controller-headless"
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "metrics"}
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    assert "mqcluster.broker.prestop" in container["lifecycle"]["preStop"]["exec"]["command"]
    assert pod["affinity"]["podAntiAffinity"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert spec["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "8Gi"
    assert sts["metadata"]["ownerReferences"][0]["kind"] == "BrokerGroup"
    assert spec["template"]["metadata"]["labels"][names.LABEL_COMPONENT] == "broker"


def test_client_service_selects_the_master() -> None:
    objs = by_kind(built_broker("brokergroup-masterslave"))
    client = objs["Service", "brokergroup-masterslave"]
    assert client["spec"]["selector"][names.LABEL_ROLE] == names.ROLE_MASTER
    assert client["spec"]["type"] == "NodePort"
    assert client["spec"]["ports"][0]["nodePort"] == 30081
    read = objs["Service", "brokergroup-masterslave-read"]
    assert names.LABEL_ROLE not in read["spec"]["selector"]
    pdb = objs["PodDisruptionBudget", "brokergroup-masterslave"]
    assert pdb["spec"]["maxUnavailable"] == 1
    pod = objs["StatefulSet", "brokergroup-masterslave"]["spec"]["template"]["spec"]
    assert "nodeAffinity" in pod["affinity"] and "podAntiAffinity" not in pod["affinity"]


def test_every_owned_object_has_an_owner_reference() -> None:
    for case, build in ALL:
        for obj in build(case):
            refs = obj["metadata"]["ownerReferences"]
            assert refs[0]["controller"] is True and refs[0]["uid"] == f"uid-{case}"


def test_missing_namesrv_is_a_spec_error() -> None:
    spec = BrokerGroupSpec.model_validate({"controllerRef": {"name": "mqc"}})
    with pytest.raises(SpecError, match="namesrvAddr"):
        build_brokergroup(owner("BrokerGroup", "x"), spec, MQC_VIEW)
    with pytest.raises(SpecError, match="Controller"):
        build_brokergroup(
            owner("BrokerGroup", "x"), spec.model_copy(update={"namesrvAddr": "ns:9876"}), None
        )


def test_config_change_changes_the_template_hash() -> None:
    base, view = BROKER_CASES["brokergroup-controller"]
    changed = {**base, "brokerConfig": {"flushDiskType": "SYNC_FLUSH"}}

    def config_hash(spec: dict[str, Any]) -> str:
        objs = by_kind(build_brokergroup(
            owner("BrokerGroup", "h"), BrokerGroupSpec.model_validate(spec), view))
        meta = objs["StatefulSet", "h"]["spec"]["template"]["metadata"]
        return str(meta["annotations"][names.ANNOTATION_CONFIG_HASH])

    assert config_hash(base) != config_hash(changed)


def test_scaling_keeps_the_template_hash_unless_the_learners_move() -> None:
    """Scaling adds or drops per-pod files: the pods already running keep their template
    (no roll), unless an async learner's ordinal changes with it."""
    base, view = BROKER_CASES["brokergroup-controller"]

    def config_hash(**changes: Any) -> str:
        spec = BrokerGroupSpec.model_validate({**base, **changes})
        objs = by_kind(build_brokergroup(owner("BrokerGroup", "h"), spec, view))
        meta = objs["StatefulSet", "h"]["spec"]["template"]["metadata"]
        return str(meta["annotations"][names.ANNOTATION_CONFIG_HASH])

    voters = {"asyncLearnerReplicas": 0, "inSyncReplicas": 1}
    assert config_hash(replicas=2, **voters) == config_hash(replicas=3, **voters) \
        == config_hash(replicas=5, **voters)
    assert config_hash(replicas=3, asyncLearnerReplicas=1) \
        != config_hash(replicas=4, asyncLearnerReplicas=1)
    assert config_hash(replicas=3, **voters) != config_hash(replicas=3, asyncLearnerReplicas=1)
