"""WATCH_MASTERS (1050): a long-poll that answers as soon as a group's master changes.

An mqcluster extension (RocketMQ's controllers push NOTIFY_BROKER_ROLE_CHANGED to the
group's own brokers only): a proxy sends what it knows, ``{group: masterEpoch}``, and
the controller answers when any group's master epoch differs from that (a new group,
an election, a group gone) or after ``timeoutMillis``. The answer is every group's
master address and epoch and every replica's address, so the caller can reach a new
master at once. Request and answer bodies are JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

WATCH_MASTERS = 1050
MAX_WAIT_MS = 30_000


class WatchError(ValueError):
    """A watch body that is not what this module writes."""


@dataclass(frozen=True)
class GroupMaster:
    master_address: str | None
    master_epoch: int
    replicas: tuple[str, ...] = ()


def encode_request(known: Mapping[str, int], timeout_ms: int) -> bytes:
    return json.dumps({"known": dict(known), "timeoutMillis": timeout_ms}).encode()


def decode_request(body: bytes) -> tuple[dict[str, int], int]:
    """The caller's view and how long to hold the answer (capped at MAX_WAIT_MS)."""
    try:
        raw = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError) as exc:
        raise WatchError(f"watch body is not JSON: {exc}") from exc
    known: Any = raw.get("known", {}) if isinstance(raw, dict) else None
    timeout: Any = raw.get("timeoutMillis", MAX_WAIT_MS) if isinstance(raw, dict) else None
    if not isinstance(known, dict) or not all(
            isinstance(k, str) and type(v) is int for k, v in known.items()):
        raise WatchError("watch body's 'known' must map group names to integer epochs")
    if type(timeout) is not int or timeout < 0:
        raise WatchError("watch body's 'timeoutMillis' must be a non-negative integer")
    return known, min(timeout, MAX_WAIT_MS)


def encode_answer(masters: Mapping[str, GroupMaster]) -> bytes:
    return json.dumps({g: {"masterAddress": m.master_address, "masterEpoch": m.master_epoch,
                           "replicas": list(m.replicas)}
                       for g, m in sorted(masters.items())}).encode()


def decode_answer(body: bytes) -> dict[str, GroupMaster]:
    try:
        raw = json.loads(body or b"{}")
        return {str(g): GroupMaster(v.get("masterAddress") or None, int(v["masterEpoch"]),
                                    tuple(str(a) for a in v.get("replicas", ())))
                for g, v in raw.items()}
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise WatchError(f"malformed watch answer: {exc}") from exc
