"""ACL 2.0 at the broker's front ends: one ``Guard`` per broker, built from its config
keys and ``config/acl.json``; the remoting gate (every request code, before its
handler) and the gRPC check (every method, before the servicer).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from mqcluster.auth.credentials import Credentials, credentials_of
from mqcluster.auth.guard import Denied, Guard
from mqcluster.auth.model import User
from mqcluster.auth.table import GRPC_RULES, remoting_rights
from mqcluster.broker.acl_file import AclFile, acl_path
from mqcluster.broker.config import BrokerConfig
from mqcluster.protocol.broker import BrokerResponseCode
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.rpc import Connection, Gate

_GUARDS: dict[int, tuple[BrokerConfig, Guard]] = {}
"""Per config object (kept with it, so its id is not reused): both front ends build
theirs from the broker's config at start and share one guard and one file."""


def guard_of(cfg: Any) -> Guard | None:
    """The broker's guard; None when neither authentication nor authorization is on
    (or ``cfg`` is not a ``BrokerConfig``: an endpoint started on its own)."""
    if not isinstance(cfg, BrokerConfig) or not (
            cfg.authenticationEnabled or cfg.authorizationEnabled):
        return None
    held = _GUARDS.get(id(cfg))
    guard = held[1] if held is not None else None
    if guard is None:
        guard = Guard(
            cfg.authenticationEnabled, cfg.authorizationEnabled,
            AclFile(acl_path(cfg.storePathRootDir)),
            init_user=(credentials_of(cfg.initAuthenticationUser)
                       if cfg.initAuthenticationUser else None),
            inner=(credentials_of(cfg.innerClientAuthenticationCredentials)
                   if cfg.innerClientAuthenticationCredentials else None),
            tolerance_s=float(cfg.authenticationDateTimeToleranceSeconds))
        _GUARDS[id(cfg)] = (cfg, guard)
    return guard


def inner_credentials(cfg: BrokerConfig) -> Credentials | None:
    """What this broker signs its requests to the group's other brokers with
    (``innerClientAuthenticationCredentials``), None when not set."""
    text = cfg.innerClientAuthenticationCredentials
    return credentials_of(text) if text else None


def host_of(peer: str) -> str:
    """``"127.0.0.1:5000"`` or ``"[::1]:5000"`` / ``"ipv6:[::1]:5000"`` -> the address."""
    for scheme in ("ipv4:", "ipv6:"):
        if peer.startswith(scheme):
            peer = peer[len(scheme):]
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return host.strip("[]")


def remoting_gate(guard: Guard, cluster: str) -> Gate:
    def gate(cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        try:
            user = guard.authenticate_remoting(cmd.ext_fields, cmd.body)
            guard.authorize(user, remoting_rights(cmd.code, cmd.ext_fields, cmd.body, cluster),
                            host_of(conn.peer))
        except Denied as exc:
            return cmd.response(BrokerResponseCode.NO_PERMISSION, remark=str(exc))
        return None

    return gate


def check_grpc(guard: Guard, method: str, request: Any, metadata: Mapping[str, str],
               peer: str) -> User | None:
    """The caller of a gRPC call allowed to make it, or ``Denied``."""
    user = guard.authenticate_grpc(metadata, time.time())
    rule = GRPC_RULES.get(method)
    rights = rule(request) if rule is not None and request is not None else []
    guard.authorize(user, rights, host_of(peer))
    return user
