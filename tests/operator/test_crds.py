from __future__ import annotations

import copy
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from pydantic import BaseModel, ValidationError

from mqcluster_operator import crdgen
from mqcluster_operator.models import BrokerGroupSpec, ControllerSpec, check_transition

from .conftest import load_examples

K8S_VERSION = "1.33"

CRDS = {crd["spec"]["names"]["kind"]: crd for crd in crdgen.build_crds()}
SPEC_MODELS: dict[str, type[BaseModel]] = {
    "Controller": ControllerSpec, "BrokerGroup": BrokerGroupSpec,
}


def schema_of(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def schema_errors(obj: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(schema_of(obj["kind"]))
    return [e.message for e in validator.iter_errors(obj)]


def walk(node: Any) -> Any:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


def test_committed_files_match_the_models() -> None:
    stale = [
        str(path.relative_to(crdgen.REPO_ROOT))
        for path, text in crdgen.rendered_files().items()
        if not path.exists() or path.read_text() != text
    ]
    assert not stale, f"run `python -m mqcluster_operator.crdgen`; stale: {stale}"


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_schema_is_structural(kind: str) -> None:
    for node in walk(schema_of(kind)):
        assert "$ref" not in node and "$defs" not in node
        assert "anyOf" not in node and "oneOf" not in node
        assert node.get("type") != "null"
        assert "title" not in node
        if "properties" in node:
            assert "additionalProperties" not in node
            assert node.get("type") == "object"
        if "default" in node:
            assert node["default"] is not None


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_crd_is_a_valid_kubernetes_object(kind: str) -> None:
    kubernetes_validate.validate(CRDS[kind], K8S_VERSION, strict=True)


def test_crd_metadata() -> None:
    bg = CRDS["BrokerGroup"]["spec"]
    assert bg["group"] == "mqcluster.io"
    assert bg["names"]["shortNames"] == ["bg"]
    assert CRDS["Controller"]["spec"]["names"]["shortNames"] == ["mqc"]
    version = bg["versions"][0]
    assert version["name"] == "v1alpha1"
    assert version["subresources"] == {"status": {}}
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns[:5] == ["Mode", "Replicas", "Master", "Epoch", "Ready"]
    assert columns[-1] == "Age"


def test_free_form_maps_preserve_unknown_fields() -> None:
    spec = schema_of("BrokerGroup")["properties"]["spec"]["properties"]
    assert spec["resources"]["x-kubernetes-preserve-unknown-fields"] is True
    assert spec["scheduling"]["properties"]["affinity"]["x-kubernetes-preserve-unknown-fields"]
    assert spec["brokerConfig"]["additionalProperties"] == {"type": "string"}


def test_defaults_and_enums_reach_the_schema() -> None:
    spec = schema_of("BrokerGroup")["properties"]["spec"]["properties"]
    assert spec["mode"]["enum"] == ["Controller", "DLedger", "MasterSlave"]
    assert spec["mode"]["default"] == "Controller"
    assert spec["storage"]["default"] == {}
    assert spec["storage"]["properties"]["size"]["default"] == "8Gi"
    service_types = spec["service"]["properties"]["type"]["enum"]
    assert service_types == ["ClusterIP", "NodePort", "LoadBalancer"]
    controller = schema_of("Controller")["properties"]["spec"]
    assert controller["default"] == {}
    assert controller["properties"]["replicas"]["default"] == 3


def test_examples_are_valid() -> None:
    docs = load_examples()
    assert {d["kind"] for d in docs} == {"Controller", "BrokerGroup"}
    for doc in docs:
        assert schema_errors(doc) == [], doc["metadata"]["name"]
        SPEC_MODELS[doc["kind"]].model_validate(doc.get("spec", {}))


def brokergroup(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"mode": "Controller", "replicas": 2, "controllerRef": {"name": "mqc"}}
    base.update(spec)
    return {
        "apiVersion": "mqcluster.io/v1alpha1",
        "kind": "BrokerGroup",
        "metadata": {"name": "bg"},
        "spec": base,
    }


SCHEMA_INVALID = [
    ("replicas zero", brokergroup(replicas=0)),
    ("replicas too many", brokergroup(replicas=10)),
    ("unknown mode", brokergroup(mode="Raft")),
    ("controllerRef without name", brokergroup(controllerRef={})),
    ("bad controller name", brokergroup(controllerRef={"name": "Bad_Name"})),
    ("bad storage size", brokergroup(storage={"size": "lots"})),
    ("bad service type", brokergroup(service={"type": "Ingress"})),
    ("nodePort out of range", brokergroup(service={"type": "NodePort", "grpcNodePort": 80})),
    ("non-string broker config", brokergroup(brokerConfig={"flushDiskType": 1})),
    ("bad brokerName", brokergroup(brokerName="broker a")),
    ("no spec", {"apiVersion": "mqcluster.io/v1alpha1", "kind": "BrokerGroup", "metadata": {}}),
    (
        "controller replicas",
        {"apiVersion": "mqcluster.io/v1alpha1", "kind": "Controller", "spec": {"replicas": 0}},
    ),
    (
        "controller deployment",
        {"apiVersion": "mqcluster.io/v1alpha1", "kind": "Controller", "spec": {"deployment": "x"}},
    ),
]


@pytest.mark.parametrize(("case", "obj"), SCHEMA_INVALID, ids=[c for c, _ in SCHEMA_INVALID])
def test_schema_rejects_invalid_objects(case: str, obj: dict[str, Any]) -> None:
    assert schema_errors(obj), case
    with pytest.raises(ValidationError):
        SPEC_MODELS[obj["kind"]].model_validate(obj.get("spec"))


CEL_INVALID = [
    ("controller mode needs controllerRef", {"controllerRef": None}, "controllerRef is required"),
    ("dledger needs 3", {"mode": "DLedger", "replicas": 2}, "DLedger mode needs at least 3"),
    ("inSync above replicas", {"inSyncReplicas": 3}, "minInSyncReplicas <= inSyncReplicas"),
    ("min above inSync", {"minInSyncReplicas": 2}, "minInSyncReplicas <= inSyncReplicas"),
    ("no voters", {"asyncLearnerReplicas": 2}, "at least one voting replica"),
    ("reserved pod label", {"podLabels": {"role": "master"}}, "podLabels cannot set"),
]


@pytest.mark.parametrize(
    ("case", "patch", "message"), CEL_INVALID, ids=[c for c, _, _ in CEL_INVALID]
)
def test_cross_field_rules(case: str, patch: dict[str, Any], message: str) -> None:
    obj = brokergroup(**patch)
    obj["spec"] = {k: v for k, v in obj["spec"].items() if v is not None}
    assert schema_errors(obj) == [], "CEL-only rule must pass the plain schema"
    with pytest.raises(ValidationError, match=message):
        BrokerGroupSpec.model_validate(obj["spec"])
    rules = yaml.safe_dump(CRDS["BrokerGroup"])
    assert message in rules, "the CRD must carry the same rule as CEL"


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("brokerName", "set by the operator"),
        ("noSuchKey", "unknown key 'noSuchKey'"),
        ("deleteWhn", "unknown key 'deleteWhn': did you mean 'deleteWhen'\\?"),
        ("allAckInSyncStatSet", "did you mean 'allAckInSyncStateSet'\\? "
                                "\\(the operator sets it from the spec\\)"),
        ("sendThreadPoolQueueCapacity", "RocketMQ key 'sendThreadPoolQueueCapacity' cannot be "
                                        "overridden here"),
    ],
)
def test_broker_config_keys_are_checked(key: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        BrokerGroupSpec.model_validate(brokergroup(brokerConfig={key: "x"})["spec"])


def test_controller_config_keys_are_checked() -> None:
    with pytest.raises(ValidationError, match="controllerDLegerPeers"):
        ControllerSpec.model_validate({"config": {"controllerDLegerPeers": "x"}})
    with pytest.raises(ValidationError, match="did you mean 'enableElectUncleanMaster'"):
        ControllerSpec.model_validate({"config": {"enableElectUnclean": "true"}})
    ControllerSpec.model_validate({"config": {"enableElectUncleanMaster": "true"}})


def test_transition_rules() -> None:
    dledger = BrokerGroupSpec.model_validate({"mode": "DLedger", "replicas": 3})
    controller = BrokerGroupSpec.model_validate(brokergroup(replicas=3)["spec"])
    master_slave = BrokerGroupSpec.model_validate({"mode": "MasterSlave", "replicas": 3})
    assert check_transition(dledger, controller) == []
    assert check_transition(controller, dledger)
    assert check_transition(master_slave, controller)
    renamed = controller.model_copy(update={"brokerName": "other"})
    assert check_transition(controller, renamed) == ["brokerName is immutable"]
    rules = [r["rule"] for r in CRDS["BrokerGroup"]["spec"]["versions"][0]["schema"]
             ["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"]]
    assert sum("oldSelf" in rule for rule in rules) == 2


def test_unknown_fields_are_rejected_by_the_model() -> None:
    spec = copy.deepcopy(brokergroup()["spec"])
    spec["replica"] = 3
    with pytest.raises(ValidationError):
        BrokerGroupSpec.model_validate(spec)
