"""The guard's modes: authentication and authorization each on or off; the bootstrap
and inner users are Super and cannot be shadowed by the file."""

from __future__ import annotations

import pytest

from mqcluster.auth.credentials import Credentials
from mqcluster.auth.guard import Denied, Guard
from mqcluster.auth.model import Action, UserType, parse_acl_config
from mqcluster.auth.signature import sign_remoting
from mqcluster.auth.table import Right

ACL = parse_acl_config({"users": [{"username": "alice", "password": "pw"},
                                  {"username": "root", "password": "file-pw"}]})
PUB = [Right("Topic", "t", (Action.PUB,))]


def signed(ak: str, sk: str) -> dict[str, str]:
    fields = {"topic": "t"}
    sign_remoting(fields, b"", ak, sk)
    return fields


def guard(authentication: bool, authorization: bool) -> Guard:
    return Guard(authentication, authorization, lambda: ACL,
                 init_user=Credentials("root", "root-pw"),
                 inner=Credentials("inner", "inner-pw"))


def test_authentication_alone_needs_a_valid_signature_and_nothing_more() -> None:
    g = guard(True, False)
    with pytest.raises(Denied) as err:
        g.authenticate_remoting({"topic": "t"}, b"")
    assert not err.value.authenticated
    alice = g.authenticate_remoting(signed("alice", "pw"), b"")
    g.authorize(alice, PUB, None)  # no policy needed


def test_authorization_alone_refuses_the_anonymous_and_checks_who_signs() -> None:
    g = guard(False, True)
    assert g.authenticate_remoting({"topic": "t"}, b"") is None
    with pytest.raises(Denied, match="no credentials"):
        g.authorize(None, PUB, None)
    alice = g.authenticate_remoting(signed("alice", "pw"), b"")
    with pytest.raises(Denied, match="no right Pub on Topic:t") as err:
        g.authorize(alice, PUB, None)
    assert err.value.authenticated


def test_both_off_lets_everything_through() -> None:
    g = guard(False, False)
    assert not g.enabled
    assert g.authenticate_remoting(signed("alice", "wrong"), b"") is None
    g.authorize(None, PUB, None)


def test_the_bootstrap_and_inner_users_are_super_and_win_over_the_file() -> None:
    g = guard(True, True)
    root = g.authenticate_remoting(signed("root", "root-pw"), b"")
    assert root is not None and root.user_type is UserType.SUPER
    with pytest.raises(Denied):
        g.authenticate_remoting(signed("root", "file-pw"), b"")
    inner = g.authenticate_remoting(signed("inner", "inner-pw"), b"")
    g.authorize(inner, [Right("Cluster", "c", (Action.UPDATE,))], None)
