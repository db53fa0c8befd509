"""Manifests -> local processes: the operator's own config, moved to one machine."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mqcluster_operator.local.plan import (
    PlanError,
    localize,
    parse_properties,
    plan,
    read_manifests,
)

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def manifests(*files: str) -> list[object]:
    return [d for f in files for d in yaml.safe_load_all((EXAMPLES / f).read_text()) if d]


def test_pod_names_and_paths_become_local() -> None:
    hosts = {"ns-0.ns-headless": "127.9.9.1", "ns-1.ns-headless": "127.9.9.2"}
    props = {
        "namesrvAddr": "ns-0.ns-headless.default.svc:9876;ns-1.ns-headless:9876",
        "controllerDLegerPeers": "n0-ns-0.ns-headless.default.svc:9878",
        "storePathCommitLog": "/home/mqcluster/store/commitlog",
        "brokerName": "xns-0.ns-headless-not-a-pod",
    }
    out = localize(props, hosts, Path("/data/b-0"), "127.9.9.3")
    assert out["namesrvAddr"] == "127.9.9.1:9876;127.9.9.2:9876"
    assert out["controllerDLegerPeers"] == "n0-127.9.9.1:9878"
    assert out["storePathCommitLog"] == "/data/b-0/commitlog"
    assert out["brokerName"] == props["brokerName"]
    assert out["bindAddress"] == out["metricsPromExporterHost"] == "127.9.9.3"


def test_the_examples_plan_as_the_operator_renders_them(tmp_path: Path) -> None:
    procs = plan(read_manifests(manifests("controller-embedded.yaml",
                                          "brokergroup-controller.yaml",
                                          "brokergroup-dledger.yaml")), "127.9.8", tmp_path)
    assert [p.name for p in procs] == ["namesrv-0", "namesrv-1", "namesrv-2", "broker-a-0",
                                       "broker-a-1", "broker-a-2", "broker-b-0", "broker-b-1",
                                       "broker-b-2"]
    assert len({p.ip for p in procs}) == len(procs)
    a0 = next(p for p in procs if p.name == "broker-a-0")
    assert a0.props["enableControllerMode"] == "true"
    assert a0.props["controllerAddr"] == "127.9.8.1:9878;127.9.8.2:9878;127.9.8.3:9878"
    assert a0.props["brokerIP1"] == a0.ip
    assert a0.props["storePathRootDir"] == str(tmp_path / "broker-a-0")
    b2 = next(p for p in procs if p.name == "broker-b-2")
    assert b2.props["dLegerSelfId"] == "n2"
    assert b2.props["dLegerPeers"].startswith("n0-127.9.8.7:40911;")
    for p in procs:  # nothing left that only resolves inside the cluster
        assert not any(".svc" in v or "headless" in v for v in p.props.values()), p.name


def test_bad_manifests_are_named() -> None:
    with pytest.raises(PlanError, match="only Controller and BrokerGroup"):
        read_manifests([{"kind": "Deployment", "metadata": {"name": "x"}}])
    with pytest.raises(PlanError, match="BrokerGroup g"):
        read_manifests([{"kind": "BrokerGroup", "metadata": {"name": "g"},
                         "spec": {"replicas": "many"}}])
    group = manifests("brokergroup-controller.yaml")
    with pytest.raises(PlanError, match="controllerRef names 'namesrv'"):
        plan(read_manifests(group), "127.9.7", Path("/tmp/x"))


def test_properties_parse_as_the_pod_concatenates_them() -> None:
    assert parse_properties("# header\na=1\nb=x=y\n\n") == {"a": "1", "b": "x=y"}


def test_a_standalone_controller_boots_on_what_it_prints(tmp_path: Path) -> None:
    """The planned boot marker is a line mqcontroller really prints ("<id> started on"):
    up returns once it is there instead of a BootError after the boot timeout."""
    from mqcluster_operator.local.runner import LocalCluster

    docs = manifests("controller.yaml")
    docs[0]["spec"]["replicas"] = 1  # type: ignore[index]
    procs = plan(read_manifests(docs), "127.9.6", tmp_path / "data")
    cluster = LocalCluster(tmp_path / "state")
    try:
        cluster.up(procs, lambda _line: None)
        assert [p.name for p in cluster.processes] == ["mqc-0"]
        assert cluster.processes[0].alive
    finally:
        cluster.down()
