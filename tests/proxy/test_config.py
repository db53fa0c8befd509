from __future__ import annotations

import pytest

from mqcluster.common.config import ConfigError, build_config
from mqcluster.proxy.config import ProxyConfig


def test_a_master_source_is_required() -> None:
    with pytest.raises(ConfigError, match="controllerAddr"):
        build_config(ProxyConfig, {"brokerName": "g"})


def test_bad_values_name_the_key() -> None:
    with pytest.raises(ConfigError, match="grpcServerPort"):
        build_config(ProxyConfig, {"brokerName": "g", "namesrvAddr": "a:1",
                                   "grpcServerPort": "x"})
    with pytest.raises(ConfigError, match="brokerName"):
        build_config(ProxyConfig, {"namesrvAddr": "a:1", "brokerName": ""})
    with pytest.raises(ConfigError, match="callTimeoutMs"):
        build_config(ProxyConfig, {"namesrvAddr": "a:1", "callTimeoutMs": "0"})


def test_without_a_broker_name_it_serves_every_group() -> None:
    assert build_config(ProxyConfig, {"controllerAddr": "a:1"}).brokerName is None


def test_defaults() -> None:
    cfg = build_config(ProxyConfig, {"brokerName": "g", "controllerAddr": "a:1;b:2"})
    assert cfg.grpcServerPort == 8081 and cfg.masterPollIntervalMs == 100
