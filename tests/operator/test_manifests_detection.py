"""The failure-detection settings the operator renders: the shipped defaults, explicitly,
in every broker's and controller's file, overridable through ``failureDetection``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from mqcluster.broker.config import BrokerConfig, load_broker_config
from mqcluster.common.config import parse_properties
from mqcluster.controller.config import ControllerConfig, load_controller_config
from mqcluster_operator.manifests import Owner, build_brokergroup, build_controller, controller_view
from mqcluster_operator.models import BrokerGroupSpec, ControllerSpec

NS = "mq"
CONTROLLER = ControllerSpec.model_validate({"deployment": "EmbeddedInNamesrv"})
VIEW = controller_view("namesrv", NS, CONTROLLER)
BROKER_KEYS = ("brokerHeartbeatInterval", "controllerHeartBeatTimeoutMills")
DLEDGER_KEYS = ("heartBeatTimeIntervalMs", "maxHeartBeatLeak")
CONTROLLER_KEYS = ("scanNotActiveBrokerInterval", "brokerHeartbeatTimeoutMills")


def owner(kind: str, name: str) -> Owner:
    return Owner(kind=kind, name=name, namespace=NS, uid=f"uid-{name}")


def config_map(objs: list[dict[str, Any]]) -> dict[str, str]:
    data: dict[str, str] = next(o for o in objs if o["kind"] == "ConfigMap")["data"]
    return data


def broker_file(spec: dict[str, Any]) -> dict[str, str]:
    objs = build_brokergroup(owner("BrokerGroup", "bg"), BrokerGroupSpec.model_validate(spec),
                             VIEW)
    return parse_properties(config_map(objs)["broker.conf"])


def controller_file(spec: dict[str, Any]) -> tuple[str, dict[str, str]]:
    model = ControllerSpec.model_validate(spec)
    data = config_map(build_controller(owner("Controller", "c"), model))
    name = "namesrv.conf" if model.embedded() else "controller.conf"
    return data[name], parse_properties(data[name])


CONTROLLER_MODE = {"controllerRef": {"name": "namesrv"}, "replicas": 3}
DLEDGER_MODE = {"mode": "DLedger", "replicas": 3, "namesrvAddr": "ns:9876"}


def test_controller_mode_brokers_get_the_shipped_heartbeat_settings() -> None:
    props = broker_file(CONTROLLER_MODE)
    for key in BROKER_KEYS:
        assert props[key] == str(BrokerConfig.model_fields[key].default)
    assert not set(DLEDGER_KEYS) & set(props)


def test_dledger_brokers_get_the_shipped_election_settings() -> None:
    props = broker_file(DLEDGER_MODE)
    for key in DLEDGER_KEYS:
        assert props[key] == str(BrokerConfig.model_fields[key].default)
    assert not set(BROKER_KEYS) & set(props)


@pytest.mark.parametrize("deployment", ["Standalone", "EmbeddedInNamesrv"])
def test_controllers_get_the_shipped_scan_and_timeout(deployment: str) -> None:
    _, props = controller_file({"deployment": deployment})
    for key in CONTROLLER_KEYS:
        assert props[key] == str(ControllerConfig.model_fields[key].default)


def test_failure_detection_fields_override_and_the_processes_read_them(tmp_path: Path) -> None:
    spec = {**CONTROLLER_MODE, "failureDetection": {"brokerHeartbeatInterval": 1000,
                                                    "controllerHeartBeatTimeoutMills": 5000}}
    props = broker_file(spec)
    assert (props["brokerHeartbeatInterval"], props["controllerHeartBeatTimeoutMills"]) == \
        ("1000", "5000")
    conf = tmp_path / "broker.conf"
    conf.write_text("\n".join(f"{k}={v}" for k, v in props.items()) + "\nbrokerIP1=127.0.0.1\n")
    cfg = load_broker_config(conf)
    assert (cfg.brokerHeartbeatInterval, cfg.controllerHeartBeatTimeoutMills) == (1000, 5000)

    dledger = broker_file({**DLEDGER_MODE, "failureDetection": {"heartBeatTimeIntervalMs": 200,
                                                                "maxHeartBeatLeak": 5}})
    assert (dledger["heartBeatTimeIntervalMs"], dledger["maxHeartBeatLeak"]) == ("200", "5")

    text, cprops = controller_file({"failureDetection": {"scanNotActiveBrokerInterval": 100}})
    assert cprops["scanNotActiveBrokerInterval"] == "100"
    (tmp_path / "controller.conf").write_text(text + "controllerDLegerSelfId=n0\n")
    assert load_controller_config(tmp_path / "controller.conf").scanNotActiveBrokerInterval == 100


def test_free_form_config_cannot_repeat_a_failure_detection_key() -> None:
    with pytest.raises(ValidationError, match=r"failureDetection\.controllerHeartBeatTimeoutMills"):
        BrokerGroupSpec.model_validate(
            {**CONTROLLER_MODE, "brokerConfig": {"controllerHeartBeatTimeoutMills": "1500"}})
    with pytest.raises(ValidationError, match=r"failureDetection\.scanNotActiveBrokerInterval"):
        ControllerSpec.model_validate({"config": {"scanNotActiveBrokerInterval": "200"}})


def test_a_timeout_shorter_than_two_heartbeats_is_refused_naming_both() -> None:
    with pytest.raises(ValidationError, match=r"at least 2 x brokerHeartbeatInterval.*900 and 500"):
        BrokerGroupSpec.model_validate(
            {**CONTROLLER_MODE, "failureDetection": {"controllerHeartBeatTimeoutMills": 900}})
