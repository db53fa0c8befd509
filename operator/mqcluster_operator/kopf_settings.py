"""kopf settings the operator does not leave to defaults.

kopf leaves watch timeouts unset, so a watch stream the network silently drops
can hang until the inactivity timer fires; explicit server and client timeouts
make every stream end and be replaced on a schedule. Each value can be
overridden by an environment variable (seconds).

The server timeout is sent as the watch's ``timeoutSeconds`` query parameter, which the
API server parses as an integer: ``300.0`` gets every watch refused with
``400 strconv.ParseInt``, so it is a whole number of seconds, and its variable too.

With peering, instances of equal priority all pause: each replica takes a priority
derived from its pod name (``POD_NAME``), so one of two is active and the other
stands by.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping

import kopf

SERVER_TIMEOUT = "MQCLUSTER_WATCH_SERVER_TIMEOUT_SECONDS"
DEFAULT_SERVER_TIMEOUT = 300
DEFAULTS: dict[str, float] = {
    "MQCLUSTER_WATCH_CLIENT_TIMEOUT_SECONDS": 330.0,
    "MQCLUSTER_WATCH_CONNECT_TIMEOUT_SECONDS": 30.0,
    "MQCLUSTER_API_REQUEST_TIMEOUT_SECONDS": 60.0,
    "MQCLUSTER_API_CONNECT_TIMEOUT_SECONDS": 30.0,
}


def _seconds(env: Mapping[str, str], name: str) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return DEFAULTS[name]
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(
            f"environment variable {name} must be a number of seconds: {raw!r}"
        ) from None
    if value <= 0:
        raise ValueError(f"environment variable {name} must be positive: {raw!r}")
    return value


def _whole_seconds(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ValueError(
            f"environment variable {name} must be a whole number of seconds"
            f" (the API server takes an integer timeoutSeconds): {raw!r}"
        ) from None
    if value <= 0:
        raise ValueError(f"environment variable {name} must be positive: {raw!r}")
    return value


def configure(settings: kopf.OperatorSettings, env: Mapping[str, str] = os.environ) -> None:
    settings.watching.server_timeout = _whole_seconds(env, SERVER_TIMEOUT, DEFAULT_SERVER_TIMEOUT)
    settings.watching.client_timeout = _seconds(env, "MQCLUSTER_WATCH_CLIENT_TIMEOUT_SECONDS")
    settings.watching.connect_timeout = _seconds(env, "MQCLUSTER_WATCH_CONNECT_TIMEOUT_SECONDS")
    settings.networking.request_timeout = _seconds(env, "MQCLUSTER_API_REQUEST_TIMEOUT_SECONDS")
    settings.networking.connect_timeout = _seconds(env, "MQCLUSTER_API_CONNECT_TIMEOUT_SECONDS")
    if env.get("POD_NAME"):
        settings.peering.priority = peering_priority(env["POD_NAME"])


def peering_priority(pod_name: str) -> int:
    """A stable priority in [1, 2**31) from the pod name: distinct replicas differ."""
    digest = hashlib.sha256(pod_name.encode()).digest()
    return 1 + int.from_bytes(digest[:4], "big") % (2**31 - 1)
