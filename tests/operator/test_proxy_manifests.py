"""The proxy tier a Controller renders: Deployment, client Service, PDB, ConfigMap and an
HPA when asked; the endpoint in status; what proxy.* refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from pydantic import ValidationError

from mqcluster.proxy.config import ProxyConfig
from mqcluster_operator.local.plan import parse_properties
from mqcluster_operator.manifests import Owner
from mqcluster_operator.manifests.proxy import build_proxy
from mqcluster_operator.models import PROXY_KEYS, PROXY_MANAGED_KEYS, ControllerSpec
from mqcluster_operator.reconcile import plan_controller

from .golden_io import check_golden

K8S_VERSION = "1.33"
OWNER = Owner("Controller", "mqc", "mq", "uid-1")
ENABLED: dict[str, Any] = {"proxy": {"enabled": True}}


def built(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in build_proxy(OWNER, ControllerSpec.model_validate(spec))}


def test_nothing_is_rendered_unless_enabled() -> None:
    assert built({}) == {}


def test_golden_proxy_tier() -> None:
    spec = ControllerSpec.model_validate({
        "deployment": "EmbeddedInNamesrv",
        "proxy": {"enabled": True, "replicas": 3, "resources": {"requests": {"cpu": "500m"}},
                  "autoscaling": {"enabled": True, "maxReplicas": 8},
                  "config": {"callTimeoutMs": "800"}}})
    check_golden("controller-proxy", build_proxy(OWNER, spec))


@pytest.mark.parametrize("spec", [ENABLED, {"proxy": {
    "enabled": True, "autoscaling": {"enabled": True},
    "service": {"type": "NodePort", "nodePort": 30081}}}])
def test_objects_validate_against_kubernetes_schemas(spec: dict[str, Any]) -> None:
    for obj in built(spec).values():
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_a_deployment_of_two_behind_one_client_service_and_a_pdb() -> None:
    objs = built(ENABLED)
    assert set(objs) == {"ConfigMap", "Deployment", "Service", "PodDisruptionBudget"}
    dep = objs["Deployment"]
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    selector = dep["spec"]["selector"]["matchLabels"]
    assert objs["Service"]["spec"]["selector"] == selector
    assert objs["PodDisruptionBudget"]["spec"] == {"maxUnavailable": 1,
                                                   "selector": {"matchLabels": selector}}
    assert objs["Service"]["spec"]["ports"] == [
        {"name": "grpc", "port": 8081, "targetPort": "grpc", "protocol": "TCP"}]
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "metrics"}
    assert container["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "2"]
    assert dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 15
    assert "exec mqproxy -c" in container["command"][-1]


def test_the_proxy_learns_the_controllers_and_name_servers() -> None:
    conf = parse_properties(built({"deployment": "EmbeddedInNamesrv", **ENABLED})
                            ["ConfigMap"]["data"]["proxy.conf"])
    assert conf["controllerAddr"] == ";".join(
        f"mqc-{i}.mqc-headless.mq.svc:9878" for i in range(3))
    assert conf["namesrvAddr"] == ";".join(f"mqc-{i}.mqc-headless.mq.svc:9876" for i in range(3))
    assert (conf["metricsPromExporterPort"], conf["drainMs"]) == ("5558", "5000")
    assert "namesrvAddr" not in parse_properties(built(ENABLED)["ConfigMap"]["data"]["proxy.conf"])


def test_autoscaling_when_asked_and_the_deployment_leaves_replicas_to_it() -> None:
    objs = built({"proxy": {"enabled": True, "replicas": 3,
                            "autoscaling": {"enabled": True, "maxReplicas": 9,
                                            "targetCPUUtilizationPercentage": 60}}})
    hpa = objs["HorizontalPodAutoscaler"]["spec"]
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (3, 9)
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                     "name": "mqc-proxy"}
    assert hpa["metrics"][0]["resource"]["target"]["averageUtilization"] == 60
    assert "replicas" not in objs["Deployment"]["spec"]


@pytest.mark.parametrize("proxy, problem", [
    ({"replicas": 1}, "replicas"),
    ({"config": {"controllerAddr": "x:1"}}, "set by the operator"),
    ({"config": {"calTimeoutMs": "5"}}, "unknown proxy key 'calTimeoutMs'"),
    ({"autoscaling": {"enabled": True, "minReplicas": 5, "maxReplicas": 4}}, "maxReplicas"),
])
def test_bad_proxy_settings_are_refused_naming_the_field(proxy: dict[str, Any],
                                                         problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        ControllerSpec.model_validate({"proxy": {"enabled": True, **proxy}})


def test_the_operators_proxy_keys_are_the_proxys() -> None:
    assert set(ProxyConfig.model_fields) == PROXY_KEYS | PROXY_MANAGED_KEYS
    assert not PROXY_KEYS & PROXY_MANAGED_KEYS


def test_the_controller_plan_applies_the_tier_and_names_the_endpoint() -> None:
    body = {"apiVersion": "mqcluster.io/v1alpha1", "kind": "Controller",
            "metadata": {"name": "mqc", "namespace": "mq", "uid": "u", "generation": 1},
            "spec": ENABLED}
    outcome = plan_controller(body, "2026-01-01T00:00:00Z")
    assert [o["kind"] for o in outcome.objects][-4:] == [
        "ConfigMap", "Deployment", "Service", "PodDisruptionBudget"]
    assert outcome.status["proxyEndpoint"] == "mqc-proxy.mq.svc:8081"
    off = plan_controller({**body, "spec": {}, "status": {"proxyEndpoint": "old:1"}},
                          "2026-01-01T00:00:00Z")
    assert off.status["proxyEndpoint"] is None  # cleared once disabled


def test_a_local_cluster_runs_the_proxies_after_every_pod(tmp_path: Path) -> None:
    from mqcluster_operator.local.plan import Manifests, plan

    spec = ControllerSpec.model_validate({"replicas": 3, "deployment": "EmbeddedInNamesrv",
                                          **ENABLED})
    procs = plan(Manifests([(Owner("Controller", "ns", "local", "u"), spec)], []),
                 "127.9.6", tmp_path)
    assert [(p.name, p.kind) for p in procs][-2:] == [("ns-proxy-0", "proxy"),
                                                      ("ns-proxy-1", "proxy")]
    proxy = procs[-1]
    assert proxy.module == "mqcluster.proxy.main"
    assert proxy.props["controllerAddr"] == "127.9.6.1:9878;127.9.6.2:9878;127.9.6.3:9878"
    assert proxy.props["namesrvAddr"] == "127.9.6.1:9876;127.9.6.2:9876;127.9.6.3:9876"
    assert proxy.props["bindAddress"] == proxy.ip == "127.9.6.5"
