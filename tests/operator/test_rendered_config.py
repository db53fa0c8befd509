"""What the operator renders, each pod's file as its start script concatenates it, is
accepted by the process that reads it: no unknown key, no key twice, no empty name, even
with every key a custom resource may override."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from mqcluster.broker.config import BrokerConfig, load_broker_config
from mqcluster.controller.config import ControllerConfig, load_controller_config
from mqcluster.namesrv.config import NamesrvConfig
from mqcluster.namesrv.main import build_parser, load
from mqcluster_operator.config_keys import BROKER_KEYS, CONTROLLER_KEYS
from mqcluster_operator.manifests import Owner, controller_view
from mqcluster_operator.manifests import broker as broker_manifests
from mqcluster_operator.manifests import controller as controller_manifests
from mqcluster_operator.models import BrokerGroupSpec, ControllerSpec

NS = "mq"


def value_for(key: str, models: tuple[type[Any], ...]) -> str:
    """A valid value: the model's default where a model reads the key, else a number."""
    special = {"controllerType": "DLedger", "messageDelayLevel": "1s 5s",
               "messageStorePlugIn": ""}
    if key in special:
        return special[key]
    for model in models:
        if key in model.model_fields:
            default = model.model_fields[key].get_default(call_default_factory=True)
            if isinstance(default, bool):
                return str(default).lower()
            return str(default.value if hasattr(default, "value") else default)
    return "1000"


def pod_files(data: dict[str, str], conf: str, replicas: int, tmp: Path) -> list[Path]:
    """``cat <conf> pod-<i>.conf > run/<conf>``, as the pods' start script does."""
    out = []
    for i in range(replicas):
        path = tmp / f"pod-{i}-{conf}"
        path.write_text(data[conf] + data[f"pod-{i}.conf"])
        out.append(path)
    return out


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("mode", ["Controller", "DLedger", "MasterSlave"])
def test_broker_files_with_every_overridable_key_load(
    tmp_path: Path, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    overrides = {k: value_for(k, (BrokerConfig,)) for k in sorted(BROKER_KEYS)}
    spec = BrokerGroupSpec.model_validate({
        "mode": mode, "replicas": 3, "namesrvAddr": "ns-0.ns:9876",
        "controllerRef": {"name": "mqc"} if mode == "Controller" else None,
        "inSyncReplicas": 2, "asyncLearnerReplicas": 1 if mode == "Controller" else 0,
        "brokerConfig": overrides,
    })
    view = controller_view("mqc", NS, ControllerSpec()) if mode == "Controller" else None
    data = broker_manifests.config_data(Owner("BrokerGroup", "b", NS, "uid"), spec, view)
    with caplog.at_level(logging.WARNING):
        for path in pod_files(data, broker_manifests.CONF, spec.replicas, tmp_path):
            load_broker_config(path)
    ignored = {m.split("'")[1] for m in warnings_of(caplog)}
    assert ignored == set(overrides) - set(BrokerConfig.model_fields), \
        "only the RocketMQ keys the broker does not implement are warned about"


@pytest.mark.parametrize("deployment", ["Standalone", "EmbeddedInNamesrv"])
def test_controller_files_with_every_overridable_key_load(
    tmp_path: Path, deployment: str, caplog: pytest.LogCaptureFixture
) -> None:
    models = (ControllerConfig, NamesrvConfig)
    spec = ControllerSpec.model_validate({
        "deployment": deployment,
        "config": {k: value_for(k, models) for k in sorted(CONTROLLER_KEYS)},
    })
    data = controller_manifests.config_data(Owner("Controller", "mqc", NS, "uid"), spec)
    conf = controller_manifests.conf_name(spec)
    with caplog.at_level(logging.WARNING):
        for path in pod_files(data, conf, spec.replicas, tmp_path):
            if spec.embedded():
                _, props, source = load(build_parser().parse_args(["-c", str(path)]))
                ControllerConfig.from_properties(props, source)
            else:
                load_controller_config(path)
    assert all("is not implemented" in m for m in warnings_of(caplog))


def test_a_misspelt_override_is_reported_in_status_with_the_key_meant() -> None:
    from mqcluster_operator.reconcile import plan_brokergroup

    body = {"metadata": {"name": "b", "namespace": NS, "generation": 3},
            "spec": {"mode": "DLedger", "replicas": 3, "namesrvAddr": "ns:9876",
                     "brokerConfig": {"flushDiskTyp": "SYNC_FLUSH"}}}
    outcome = plan_brokergroup(body, None, "2026-01-01T00:00:00Z")
    assert outcome.status["phase"] == "Failed"
    ready = next(c for c in outcome.status["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "InvalidSpec"
    assert ready["message"] == ("spec.brokerConfig: unknown key 'flushDiskTyp': "
                                "did you mean 'flushDiskType'?")
