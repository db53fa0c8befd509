from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import Field

from mqcluster.common import rocketmq_keys
from mqcluster.common.config import (
    ConfigError,
    RocketConfig,
    build_config,
    closest_key,
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


def test_rocketmq_keys_we_do_not_implement_are_ignored_with_a_warning(caplog) -> None:
    cfg = build_config(SampleConfig, {"deleteWhen": "04", "enableControllerMode": "true"})
    assert cfg.enableControllerMode is True
    assert "RocketMQ key 'deleteWhen' (MessageStoreConfig) is not implemented" in caplog.text


def test_load_config_applies_overrides(tmp_path: Path) -> None:
    path = tmp_path / "b.conf"
    path.write_text("brokerName=b2\nlistenPort=1\n")
    cfg = load_config(SampleConfig, path, {"listenPort": "2"})
    assert (cfg.brokerName, cfg.listenPort) == ("b2", 2)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(SampleConfig, tmp_path / "nope.conf")


class NamedConfig(RocketConfig):
    brokerName: str = Field(default="host", min_length=1)
    dLegerGroup: str | None = None
    allAckInSyncStateSet: bool = False
    brokerIP1: str | None = None
    listenPort: int = 10911


def test_a_misspelt_key_stops_the_load_with_the_closest_key_and_its_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "broker.conf"
    path.write_text("brokerName=b\n# durability\nallAckInSyncStatSet=true\n")
    with pytest.raises(ConfigError) as err:
        load_config(NamedConfig, path)
    assert str(err.value) == (
        f"{path}: unknown key 'allAckInSyncStatSet' on line 3: "
        "did you mean 'allAckInSyncStateSet'?"
    )


def test_every_unknown_key_is_named_and_a_far_one_gets_no_guess() -> None:
    with pytest.raises(ConfigError) as err:
        build_config(NamedConfig, {"noSuchKey": "1", "brokername": "b"}, "b.conf")
    message = str(err.value)
    assert "unknown key 'noSuchKey'" in message and "noSuchKey' on" not in message
    assert "did you mean" not in message.split(";")[0]
    assert "unknown key 'brokername': did you mean 'brokerName'?" in message


def test_a_key_of_no_model_and_no_rocketmq_class_is_not_taken_for_a_rocketmq_one() -> None:
    # our own key of another process is not a RocketMQ key either: an error, not a warning
    with pytest.raises(ConfigError, match="unknown key 'masterWaitMs'"):
        build_config(NamedConfig, {"masterWaitMs": "5"})


@pytest.mark.parametrize(
    ("text", "key", "line"),
    [
        ("listenPort=1\nbrokerName=\n", "brokerName", 2),  # min_length on the model
        ("dLegerGroup=\n", "dLegerGroup", 1),  # a RocketMQ name key
        ("brokerName = \n", "brokerName", 1),
    ],
)
def test_an_empty_name_is_an_error_naming_the_key_and_line(
    tmp_path: Path, text: str, key: str, line: int
) -> None:
    path = tmp_path / "b.conf"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(NamedConfig, path)
    assert f"key {key!r} on line {line} is empty" in str(err.value)


def test_an_empty_value_of_any_other_key_means_unset(tmp_path: Path) -> None:
    path = tmp_path / "b.conf"
    path.write_text("brokerIP1=\nlistenPort=\nbrokerName=b\n")
    cfg = load_config(NamedConfig, path)
    assert (cfg.brokerIP1, cfg.listenPort, cfg.brokerName) == (None, 10911, "b")


def test_an_empty_name_from_the_command_line_has_no_line(tmp_path: Path) -> None:
    path = tmp_path / "b.conf"
    path.write_text("brokerName=b\n")
    with pytest.raises(ConfigError) as err:
        load_config(NamedConfig, path, {"brokerName": ""})
    assert "key 'brokerName' is empty" in str(err.value)


def test_a_duplicated_key_is_an_error_naming_it_and_its_lines() -> None:
    text = "brokerName=a\nlistenPort=1\n\nbrokerName=b\nlistenPort: 1\nbrokerName=c\n"
    with pytest.raises(ConfigError) as err:
        parse_properties(text, "b.conf")
    assert str(err.value) == (
        "b.conf: key 'brokerName' is set more than once (lines 1, 4, 6): keep one; "
        "key 'listenPort' is set more than once (lines 2, 5): keep one"
    )


def test_a_config_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "b.conf"
    path.write_bytes(b"brokerName=\xff\xfe\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(NamedConfig, path)


def test_the_command_line_may_set_a_key_the_file_has(tmp_path: Path) -> None:
    path = tmp_path / "b.conf"
    path.write_text("brokerName=b\n")
    assert load_config(NamedConfig, path, {"brokerName": "c"}).brokerName == "c"


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("allAckInSyncStatSet", "allAckInSyncStateSet"),
        ("ALLACKINSYNCSTATESET", "allAckInSyncStateSet"),
        ("brokerNmae", "brokerName"),
        ("storePathRoot", "storePathRootDir"),
        ("enableControlerMode", "enableControllerMode"),
        ("noSuchKey", None),
    ],
)
def test_closest_key(typo: str, meant: str | None) -> None:
    known = ["brokerName", "storePathRootDir", "enableControllerMode", *rocketmq_keys.ALL]
    assert closest_key(typo, known) == meant


def test_the_rocketmq_key_list_names_the_class_of_each_key() -> None:
    assert rocketmq_keys.classes_of("allAckInSyncStateSet") == ["MessageStoreConfig"]
    assert rocketmq_keys.classes_of("controllerDLegerPeers") == ["ControllerConfig"]
    assert "NettyServerConfig" in rocketmq_keys.classes_of("serverChannelMaxIdleTimeSeconds")
    assert rocketmq_keys.classes_of("allAckInSyncStatSet") == []


KEYS = st.sampled_from(["a", "b", "brokerName", "listenPort"])


@given(st.lists(st.tuples(KEYS, st.text("xyz019 ", max_size=4)), max_size=8))
def test_parse_fails_exactly_when_a_key_repeats(pairs: list[tuple[str, str]]) -> None:
    text = "".join(f"{k}={v}\n" for k, v in pairs)
    keys = [k for k, _ in pairs]
    if len(set(keys)) == len(keys):
        assert parse_properties(text) == {k: v.strip() for k, v in pairs}
    else:
        with pytest.raises(ConfigError, match="is set more than once"):
            parse_properties(text)


def test_a_value_set_after_parsing_has_no_line() -> None:
    props = parse_properties("a=1\nlistenPort=2\n")
    props["listenPort"] = "x"
    assert props.lines == {"a": 1}
    with pytest.raises(ConfigError) as err:
        build_config(NamedConfig, props.subset(["listenPort"]))
    assert "('x'): " in str(err.value) and "line" not in str(err.value)
