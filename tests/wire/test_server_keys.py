"""The limit keys of every remoting server's config model, and the limits they make."""

from __future__ import annotations

import pytest

from mqcluster.common.config import ConfigError, build_config
from mqcluster.controller.config import ControllerConfig
from mqcluster.controller.service import ControllerService
from mqcluster.namesrv.config import NamesrvConfig
from mqcluster.namesrv.server import NamesrvServer
from mqcluster.wire.limits import ServerLimits

MIB = 1024 * 1024
MODELS = [NamesrvConfig, ControllerConfig]


@pytest.mark.parametrize("model", MODELS)
def test_defaults_are_rocketmqs_where_it_has_them(model: type[NamesrvConfig]) -> None:
    limits = build_config(model, {}).server_limits()
    assert limits == ServerLimits(max_frame_size=16 * MIB, max_connections=4096,
                                  max_partial_bytes=24 * MIB, idle_seconds=120.0,
                                  frame_deadline_seconds=30.0, listen_backlog=1024)


@pytest.mark.parametrize("model", MODELS)
def test_keys_set_the_limits(model: type[NamesrvConfig]) -> None:
    cfg = build_config(model, {
        "serverFrameMaxLength": "65536", "serverMaxConnections": "10",
        "serverPartialFramesMaxBytes": "1048576", "serverChannelMaxIdleTimeSeconds": "0",
        "serverFrameReadTimeoutSeconds": "5", "serverSocketBacklog": "64"})
    assert cfg.server_limits() == ServerLimits(
        max_frame_size=65536, max_connections=10, max_partial_bytes=1 << 20,
        idle_seconds=0.0, frame_deadline_seconds=5.0, listen_backlog=64)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize(("key", "value"), [
    ("serverFrameMaxLength", "100"),
    ("serverFrameMaxLength", "4294967296"),
    ("serverFrameMaxLength", "sixteen"),
    ("serverMaxConnections", "0"),
    ("serverPartialFramesMaxBytes", "-1"),
    ("serverChannelMaxIdleTimeSeconds", "-5"),
    ("serverFrameReadTimeoutSeconds", "1.5s"),
    ("serverSocketBacklog", "0"),
])
def test_a_bad_value_names_its_key(model: type[NamesrvConfig], key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"key '{key}' \\('{value}'\\)"):
        build_config(model, {key: value})


@pytest.mark.parametrize("model", MODELS)
def test_a_budget_that_cannot_hold_the_largest_frame_is_refused(
        model: type[NamesrvConfig]) -> None:
    with pytest.raises(ConfigError, match="serverPartialFramesMaxBytes=1048576 must be at "
                       "least the largest frame \\(serverFrameMaxLength=16777216\\)"):
        build_config(model, {"serverPartialFramesMaxBytes": "1048576"})
    # unset, it grows to hold the largest frame
    cfg = build_config(model, {"serverFrameMaxLength": str(64 * MIB)})
    assert cfg.server_limits().max_partial_bytes == 64 * MIB + 4


def test_the_name_server_listens_with_its_limits() -> None:
    cfg = build_config(NamesrvConfig, {"serverMaxConnections": "3"})
    assert NamesrvServer(cfg).rpc.limits == cfg.server_limits()


async def test_the_controller_listens_with_its_limits(tmp_path) -> None:
    cfg = build_config(ControllerConfig, {"serverMaxConnections": "3",
                                          "controllerStorePath": str(tmp_path)})
    service = ControllerService(cfg, run_scanner=False)
    assert service.server.limits == cfg.server_limits()
