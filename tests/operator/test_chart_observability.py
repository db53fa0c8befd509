"""The chart's observability objects: the PrometheusRule (files/alerts.yaml as it is), the
PodMonitor (selecting the pods the operator renders) and the Grafana dashboard ConfigMaps
(dashboards/*.json, the sidecar's label); all off by default."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from mqcluster_operator.manifests import Owner, build_brokergroup, build_controller
from mqcluster_operator.models import BrokerGroupSpec, ControllerSpec

from .chart_tools import CHART, kinds, run, template

ALL_ON = ["prometheusRule.enabled=true", "podMonitor.enabled=true",
          "grafanaDashboards.enabled=true"]
DASHBOARDS = sorted((CHART / "dashboards").glob("*.json"))


def dashboards_of(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == "ConfigMap"
            and o["metadata"]["labels"].get("grafana_dashboard") == "1"]


def test_nothing_is_rendered_by_default(helm: Path) -> None:
    objs = template(helm)
    assert not {"PrometheusRule", "PodMonitor"} & set(kinds(objs))
    assert dashboards_of(objs) == []


def test_lint_with_everything_on(helm: Path) -> None:
    cmd = [str(helm), "lint", "--strict", str(CHART)]
    for item in [*ALL_ON, "serviceMonitor.enabled=true"]:
        cmd += ["--set", item]
    result = run(cmd)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_prometheus_rule_holds_the_alert_file_as_it_is(helm: Path) -> None:
    objs = kinds(template(helm, "prometheusRule.enabled=true",
                          "prometheusRule.labels.release=kps"))
    (rule,) = objs["PrometheusRule"]
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == "mq"
    assert rule["metadata"]["labels"]["release"] == "kps"
    source = yaml.safe_load((CHART / "files" / "alerts.yaml").read_text())
    assert rule["spec"]["groups"] == source["groups"]
    # Prometheus' own templates reach the PrometheusRule untouched by helm
    assert any("{{ $labels.broker }}" in r["annotations"]["summary"]
               for g in rule["spec"]["groups"] for r in g["rules"])


def test_dashboards_are_config_maps_for_the_grafana_sidecar(helm: Path) -> None:
    objs = dashboards_of(template(helm, "grafanaDashboards.enabled=true",
                                  "grafanaDashboards.namespace=monitoring",
                                  "grafanaDashboards.folder=mqcluster"))
    assert len(objs) == len(DASHBOARDS) >= 3
    by_key = {next(iter(o["data"])): o for o in objs}
    assert set(by_key) == {p.name for p in DASHBOARDS}
    for path in DASHBOARDS:
        cm = by_key[path.name]
        kubernetes_validate.validate(cm, "1.33", strict=True)
        assert cm["metadata"]["namespace"] == "monitoring"
        assert cm["metadata"]["annotations"] == {"grafana_folder": "mqcluster"}
        assert json.loads(cm["data"][path.name]) == json.loads(path.read_text())


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.stem for p in DASHBOARDS])
def test_every_dashboard_is_well_formed(path: Path) -> None:
    board = json.loads(path.read_text())
    assert board["uid"] and board["title"].startswith("mqcluster / ")
    variables = {v["name"] for v in board["templating"]["list"]}
    assert "datasource" in variables
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            used = set(re.findall(r"\$(\w+)", target["expr"])) - {"__rate_interval"}
            assert used <= variables, (panel["title"], used - variables)


def test_the_pod_monitor_selects_every_broker_and_controller_pod(helm: Path) -> None:
    (pm,) = kinds(template(helm, "podMonitor.enabled=true"))["PodMonitor"]
    selector = pm["spec"]["selector"]["matchLabels"]
    assert pm["spec"]["namespaceSelector"] == {"any": True}
    port = pm["spec"]["podMetricsEndpoints"][0]["port"]
    owner = Owner("BrokerGroup", "bg", "mq", "uid-1")
    built = (build_brokergroup(owner, BrokerGroupSpec.model_validate(
                 {"mode": "MasterSlave", "replicas": 2, "namesrvAddr": "ns:9876"}), None)
             + build_controller(Owner("Controller", "c", "mq", "uid-2"),
                                ControllerSpec.model_validate({"replicas": 3})))
    sets = [o for o in built if o["kind"] == "StatefulSet"]
    assert len(sets) == 2
    for sts in sets:
        pod = sts["spec"]["template"]
        assert selector.items() <= pod["metadata"]["labels"].items(), sts["metadata"]["name"]
        ports = {p["name"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
        assert port in ports, sts["metadata"]["name"]


def test_a_namespaced_pod_monitor_watches_the_operator_namespaces(helm: Path) -> None:
    (pm,) = kinds(template(helm, "podMonitor.enabled=true", "watch.allNamespaces=false",
                           "watch.namespaces={team-a,team-b}"))["PodMonitor"]
    assert pm["spec"]["namespaceSelector"] == {"matchNames": ["team-a", "team-b"]}


@pytest.mark.parametrize("bad", ["prometheusRule.bogus=1", "grafanaDashboards.namespace=Bad_NS",
                                 "podMonitor.interval=often"])
def test_bad_values_are_refused_naming_the_schema(helm: Path, bad: str) -> None:
    result = run([str(helm), "template", "rel", str(CHART), "--set", bad])
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
