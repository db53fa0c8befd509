"""Users and policies in RocketMQ 5.3's names and JSON forms.

A user is ``{"username", "password", "userType": "Super"|"Normal", "userStatus"}``
(access key = username, secret key = password). An ACL is ``{"subject": "User:<name>",
"policies": [{"policyType", "entries": [{"resource", "actions", "sourceIps",
"decision"}]}]}``; a resource is ``Kind:name`` (exact), ``Kind:prefix*`` or ``Kind:*``,
or ``*`` for every resource.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class AclError(ValueError):
    """Users or policies that cannot be read: the message names the entry and field."""


class Action(Enum):
    PUB = "Pub"
    SUB = "Sub"
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    GET = "Get"
    LIST = "List"
    ALL = "All"


KINDS = ("Cluster", "Namespace", "Topic", "Group")


class UserType(Enum):
    SUPER = "Super"
    NORMAL = "Normal"


class Decision(Enum):
    ALLOW = "Allow"
    DENY = "Deny"


@dataclass(frozen=True)
class User:
    username: str
    password: str
    user_type: UserType = UserType.NORMAL
    enabled: bool = True


@dataclass(frozen=True)
class ResourcePattern:
    """``kind`` None means every kind (``*``); ``name`` is the exact name or the prefix."""

    kind: str | None
    name: str
    prefix: bool = False

    @classmethod
    def parse(cls, text: str) -> ResourcePattern:
        if text == "*":
            return cls(None, "", prefix=True)
        kind, sep, name = text.partition(":")
        if not sep or kind not in KINDS or not name:
            raise AclError(f"resource {text!r} is not Kind:name with Kind one of "
                           f"{', '.join(KINDS)} (or '*')")
        if name.endswith("*"):
            if "*" in name[:-1]:
                raise AclError(f"resource {text!r}: '*' only at the end")
            return cls(kind, name[:-1], prefix=True)
        if "*" in name:
            raise AclError(f"resource {text!r}: '*' only at the end")
        return cls(kind, name)

    def matches(self, kind: str, name: str) -> bool:
        if self.kind is not None and self.kind != kind:
            return False
        return name.startswith(self.name) if self.prefix else name == self.name


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class PolicyEntry:
    resource: ResourcePattern
    actions: frozenset[Action]
    decision: Decision
    source_ips: tuple[Network, ...] = ()

    def applies(self, kind: str, name: str, action: Action, source: str | None) -> bool:
        if not self.resource.matches(kind, name):
            return False
        if Action.ALL not in self.actions and action not in self.actions:
            return False
        if self.source_ips:
            if source is None:
                return False
            try:
                ip = ipaddress.ip_address(source)
            except ValueError:
                return False
            return any(ip in net for net in self.source_ips)
        return True


@dataclass(frozen=True)
class Acl:
    subject: str
    entries: tuple[PolicyEntry, ...]


@dataclass
class AclConfig:
    users: dict[str, User] = field(default_factory=dict)
    acls: dict[str, Acl] = field(default_factory=dict)


def _enum(kind: type[Any], value: Any, where: str) -> Any:
    for member in kind:
        if isinstance(value, str) and member.value.lower() == value.lower():
            return member
    names = ", ".join(m.value for m in kind)
    raise AclError(f"{where}: {value!r} is not one of {names}")


def parse_user(raw: Any, where: str = "user") -> User:
    if not isinstance(raw, dict):
        raise AclError(f"{where} is not an object")
    name, password = raw.get("username"), raw.get("password")
    if not isinstance(name, str) or not name:
        raise AclError(f"{where}: username is missing or not a string")
    if not isinstance(password, str) or not password:
        raise AclError(f"{where} ({name}): password is missing or not a string")
    user_type = _enum(UserType, raw.get("userType", "Normal"), f"{where} ({name}).userType")
    status = raw.get("userStatus", "enable")
    if status not in ("enable", "disable"):
        raise AclError(f"{where} ({name}).userStatus: {status!r} is not enable or disable")
    return User(name, password, user_type, status == "enable")


def _actions(raw: Any, where: str) -> frozenset[Action]:
    items = raw.split(",") if isinstance(raw, str) else raw
    if not isinstance(items, list) or not items:
        raise AclError(f"{where}.actions: a list of actions is needed")
    return frozenset(_enum(Action, str(a).strip(), f"{where}.actions") for a in items)


def _networks(raw: Any, where: str) -> tuple[Network, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise AclError(f"{where}.sourceIps: a list is needed")
    try:
        return tuple(ipaddress.ip_network(str(n), strict=False) for n in raw)
    except ValueError as exc:
        raise AclError(f"{where}.sourceIps: {exc}") from exc


def parse_acl(raw: Any, where: str = "acl") -> Acl:
    if not isinstance(raw, dict):
        raise AclError(f"{where} is not an object")
    subject = raw.get("subject")
    if not isinstance(subject, str) or not subject.startswith("User:") or len(subject) == 5:
        raise AclError(f"{where}.subject: {subject!r} is not User:<name>")
    entries: list[PolicyEntry] = []
    for i, policy in enumerate(raw.get("policies") or []):
        if not isinstance(policy, dict):
            raise AclError(f"{where}.policies[{i}] is not an object")
        for j, e in enumerate(policy.get("entries") or []):
            at = f"{where} ({subject}).policies[{i}].entries[{j}]"
            if not isinstance(e, dict) or not isinstance(e.get("resource"), str):
                raise AclError(f"{at}.resource is missing")
            entries.append(PolicyEntry(
                ResourcePattern.parse(e["resource"]), _actions(e.get("actions"), at),
                _enum(Decision, e.get("decision", "Allow"), f"{at}.decision"),
                _networks(e.get("sourceIps"), at)))
    return Acl(subject, tuple(entries))


def parse_acl_config(raw: Any) -> AclConfig:
    """``{"users": [...], "acls": [...]}``, the form of ``config/acl.json``."""
    if not isinstance(raw, dict):
        raise AclError("the ACL file is not a JSON object with users and acls")
    cfg = AclConfig()
    for i, u in enumerate(raw.get("users") or []):
        user = parse_user(u, f"users[{i}]")
        cfg.users[user.username] = user
    for i, a in enumerate(raw.get("acls") or []):
        acl = parse_acl(a, f"acls[{i}]")
        cfg.acls[acl.subject] = acl
    return cfg
