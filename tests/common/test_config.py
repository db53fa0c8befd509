from pathlib import Path

import pytest

from mqcluster.common.config import (
    ConfigError,
    RocketConfig,
    build_config,
    load_config,
    parse_properties,
)


class SampleConfig(RocketConfig):
    brokerName: str = "broker-a"
    listenPort: int = 10911
    enableControllerMode: bool = False


def test_properties_syntax() -> None:
    text = "# comment\n! also comment\nbrokerName = b1\nlistenPort:10912\n\nurl=a=b\n"
    assert parse_properties(text) == {"brokerName": "b1", "listenPort": "10912", "url": "a=b"}


def test_line_without_separator_names_the_line() -> None:
    with pytest.raises(ConfigError, match=r"broker.conf:2: expected key=value"):
        parse_properties("a=1\njunk\n", "broker.conf")


def test_bad_value_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"key 'listenPort' \('abc'\)"):
        build_config(SampleConfig, {"listenPort": "abc"})


def test_unknown_keys_are_ignored_with_a_warning(caplog) -> None:
    cfg = build_config(SampleConfig, {"deleteWhen": "04", "enableControllerMode": "true"})
    assert cfg.enableControllerMode is True
    assert "unknown config key 'deleteWhen'" in caplog.text


def test_load_config_applies_overrides(tmp_path: Path) -> None:
    path = tmp_path / "b.conf"
    path.write_text("brokerName=b2\nlistenPort=1\n")
    cfg = load_config(SampleConfig, path, {"listenPort": "2"})
    assert (cfg.brokerName, cfg.listenPort) == ("b2", 2)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(SampleConfig, tmp_path / "nope.conf")
