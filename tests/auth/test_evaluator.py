"""ACL 2.0 matching and decisions: exact, prefix and wildcard resources, actions,
source IP ranges, Deny over Allow, Super users."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqcluster.auth.evaluator import Evaluator
from mqcluster.auth.model import (
    KINDS,
    Acl,
    AclConfig,
    AclError,
    Action,
    Decision,
    PolicyEntry,
    ResourcePattern,
    User,
    UserType,
    parse_acl_config,
)

names = st.text(alphabet="abcXYZ_-%019", min_size=1, max_size=12)
kinds = st.sampled_from(KINDS)
actions = st.sampled_from([a for a in Action if a is not Action.ALL])
ALICE = User("alice", "secret")


def entry(resource: str, acts: tuple[Action, ...], decision: Decision = Decision.ALLOW,
          ips: tuple[str, ...] = ()) -> PolicyEntry:
    return PolicyEntry(ResourcePattern.parse(resource), frozenset(acts), decision,
                       tuple(ipaddress.ip_network(i) for i in ips))


def evaluator(*entries: PolicyEntry) -> Evaluator:
    return Evaluator(AclConfig({"alice": ALICE}, {"User:alice": Acl("User:alice", entries)}))


@given(kinds, names, names)
def test_an_exact_resource_matches_its_name_only(kind: str, name: str, other: str) -> None:
    pattern = ResourcePattern.parse(f"{kind}:{name}")
    assert pattern.matches(kind, name)
    assert pattern.matches(kind, other) == (other == name)
    assert not pattern.matches(next(k for k in KINDS if k != kind), name)


@given(kinds, names, names)
def test_a_prefix_matches_exactly_the_names_that_start_with_it(
        kind: str, prefix: str, name: str) -> None:
    pattern = ResourcePattern.parse(f"{kind}:{prefix}*")
    assert pattern.matches(kind, prefix + name)
    assert pattern.matches(kind, name) == name.startswith(prefix)


@given(kinds, names)
def test_wildcards_match_every_name_of_their_kind_or_every_resource(
        kind: str, name: str) -> None:
    assert ResourcePattern.parse(f"{kind}:*").matches(kind, name)
    assert ResourcePattern.parse("*").matches(kind, name)


@given(kinds, names, actions, st.lists(st.booleans(), min_size=1, max_size=6))
def test_deny_wins_over_any_number_of_allows(kind: str, name: str, action: Action,
                                             order: list[bool]) -> None:
    """Whatever the order of the entries, one matching Deny refuses."""
    entries = [entry(f"{kind}:{name}" if deny else "*", (action,),
                     Decision.DENY if deny else Decision.ALLOW) for deny in order]
    verdict = evaluator(*entries).check(ALICE, kind, name, action)
    assert verdict.allowed == (not any(order))
    if any(order):
        assert f"denied {action.value} on {kind}:{name}" in verdict.message


@given(kinds, names, actions)
def test_without_a_matching_allow_the_missing_right_is_named(
        kind: str, name: str, action: Action) -> None:
    verdict = evaluator().check(ALICE, kind, name, action)
    assert not verdict.allowed
    assert verdict.message == f"user alice has no right {action.value} on {kind}:{name}"


@given(kinds, names, actions)
def test_all_covers_every_action_and_super_users_need_no_policy(
        kind: str, name: str, action: Action) -> None:
    assert evaluator(entry(f"{kind}:{name}", (Action.ALL,))).check(
        ALICE, kind, name, action).allowed
    root = User("root", "pw", UserType.SUPER)
    assert evaluator().check(root, kind, name, action).allowed


def test_an_action_not_granted_is_refused() -> None:
    ev = evaluator(entry("Topic:orders", (Action.PUB,)))
    assert ev.check(ALICE, "Topic", "orders", Action.PUB).allowed
    assert not ev.check(ALICE, "Topic", "orders", Action.SUB).allowed


def test_source_ip_ranges() -> None:
    ev = evaluator(entry("Topic:*", (Action.PUB,), ips=("10.1.0.0/16", "::1/128")))
    assert ev.check(ALICE, "Topic", "t", Action.PUB, "10.1.2.3").allowed
    assert ev.check(ALICE, "Topic", "t", Action.PUB, "::1").allowed
    refused = ev.check(ALICE, "Topic", "t", Action.PUB, "10.2.0.1")
    assert not refused.allowed and "from 10.2.0.1" in refused.message
    assert not ev.check(ALICE, "Topic", "t", Action.PUB, None).allowed


def test_the_file_form_is_rocketmqs() -> None:
    cfg = parse_acl_config({
        "users": [{"username": "alice", "password": "s", "userType": "Normal"},
                  {"username": "root", "password": "r", "userType": "Super"}],
        "acls": [{"subject": "User:alice", "policies": [{"policyType": "CUSTOM", "entries": [
            {"resource": "Topic:orders*", "actions": ["Pub", "Sub"], "decision": "Allow",
             "sourceIps": ["127.0.0.0/8"]},
            {"resource": "Topic:orders-secret", "actions": "Pub", "decision": "Deny"}]}]}],
    })
    assert cfg.users["root"].user_type is UserType.SUPER
    ev = Evaluator(cfg)
    alice = cfg.users["alice"]
    assert ev.check(alice, "Topic", "orders-1", Action.PUB, "127.0.0.2").allowed
    assert not ev.check(alice, "Topic", "orders-secret", Action.PUB, "127.0.0.2").allowed


@pytest.mark.parametrize(("raw", "named"), [
    ({"users": [{"username": "a"}]}, "password"),
    ({"users": [{"username": "a", "password": "p", "userType": "Root"}]}, "userType"),
    ({"acls": [{"subject": "alice"}]}, "subject"),
    ({"acls": [{"subject": "User:a", "policies": [{"entries": [
        {"resource": "Queue:x", "actions": ["Pub"]}]}]}]}, "Queue:x"),
    ({"acls": [{"subject": "User:a", "policies": [{"entries": [
        {"resource": "Topic:a*b", "actions": ["Pub"]}]}]}]}, "only at the end"),
    ({"acls": [{"subject": "User:a", "policies": [{"entries": [
        {"resource": "Topic:a", "actions": ["Publish"]}]}]}]}, "actions"),
    ({"acls": [{"subject": "User:a", "policies": [{"entries": [
        {"resource": "Topic:a", "actions": ["Pub"], "sourceIps": ["10.0.0.300/8"]}]}]}]},
     "sourceIps"),
    ({"acls": [{"subject": "User:a", "policies": [{"entries": [
        {"resource": "Topic:a", "actions": ["Pub"], "decision": "Maybe"}]}]}]}, "decision"),
])
def test_a_bad_entry_is_refused_naming_the_field(raw: dict[str, object], named: str) -> None:
    with pytest.raises(AclError, match=named):
        parse_acl_config(raw)
