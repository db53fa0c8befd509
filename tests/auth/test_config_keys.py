"""The broker's ACL 2.0 keys, in RocketMQ 5.3's names and JSON forms."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqcluster.auth.model import AclError
from mqcluster.broker.acl_file import AclFile
from mqcluster.broker.acl_gate import guard_of
from mqcluster.broker.config import load_broker_config
from mqcluster.common.config import ConfigError


def test_the_keys_are_off_by_default_and_read_in_rocketmqs_json_form(tmp_path: Path) -> None:
    assert guard_of(load_broker_config(None, {"storePathRootDir": str(tmp_path)})) is None
    cfg = load_broker_config(None, {
        "storePathRootDir": str(tmp_path), "authenticationEnabled": "true",
        "authorizationEnabled": "true",
        "initAuthenticationUser": '{"username": "root", "password": "pw"}',
        "innerClientAuthenticationCredentials": '{"username": "inner", "password": "ipw"}'})
    guard = guard_of(cfg)
    assert guard is not None and guard is guard_of(cfg)
    assert guard.user("root") is not None and guard.user("inner") is not None


@pytest.mark.parametrize(("key", "value", "says"), [
    ("initAuthenticationUser", "root:pw", "not JSON"),
    ("innerClientAuthenticationCredentials", '{"username": "inner"}', "password"),
])
def test_bad_credentials_fail_at_start_naming_the_key(key: str, value: str, says: str) -> None:
    with pytest.raises(ConfigError, match=key) as err:
        load_broker_config(None, {key: value})
    assert says in str(err.value)


def test_the_acl_file_is_reread_when_it_changes_and_a_bad_edit_keeps_the_last(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "acl.json"
    path.write_text(json.dumps({"users": [{"username": "a", "password": "p"}]}))
    acl = AclFile(path)
    assert set(acl().users) == {"a"}
    monkeypatch.setattr("mqcluster.broker.acl_file.RECHECK_S", 0.0)
    path.write_text(json.dumps({"users": [{"username": "b", "password": "pp"}]}))
    assert set(acl().users) == {"b"}
    path.write_text("{not json")
    assert set(acl().users) == {"b"}


def test_an_unreadable_acl_file_at_start_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "acl.json"
    path.write_text(json.dumps({"users": [{"username": "a"}]}))
    with pytest.raises(AclError, match=r"acl\.json.*password"):
        AclFile(path)
