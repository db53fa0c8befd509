"""The sample configs in examples/ load without errors or unknown keys."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import pytest

from mqcluster.broker.config import load_broker_config
from mqcluster.namesrv.main import load

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_namesrv_conf(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    args = argparse.Namespace(
        configFile=str(EXAMPLES / "namesrv.conf"), listenPort=None, bindAddress=None
    )
    config, props, _ = load(args)
    assert config.listenPort == 9876
    assert config.brokerChannelExpiredTime == 120_000
    assert props["controllerDLegerSelfId"] == "n0"
    assert not [r for r in caplog.records if "unknown config key" in r.getMessage()]


def test_namesrv_flag_overrides_file() -> None:
    args = argparse.Namespace(
        configFile=str(EXAMPLES / "namesrv.conf"), listenPort=19876, bindAddress="127.0.0.3"
    )
    config, _, _ = load(args)
    assert (config.listenPort, config.bindAddress) == (19876, "127.0.0.3")


@pytest.mark.parametrize(
    ("name", "controller_mode", "dledger"),
    [
        ("broker-master-slave-a.conf", False, False),
        ("broker-master-slave-a-s.conf", False, False),
        ("broker-controller.conf", True, False),
        ("broker-dledger.conf", False, True),
    ],
)
def test_broker_confs(
    name: str, controller_mode: bool, dledger: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    config = load_broker_config(EXAMPLES / "conf" / name)
    assert config.enableControllerMode is controller_mode
    assert config.enableDLegerCommitLog is dledger
    assert not [r for r in caplog.records if "unknown config key" in r.getMessage()]
