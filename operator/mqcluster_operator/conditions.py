"""Status conditions: set one, keeping lastTransitionTime while the status holds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Cond = dict[str, Any]


def set_condition(
    conditions: Iterable[Mapping[str, Any]],
    type_: str,
    status: bool | None,
    reason: str,
    message: str,
    now: str,
    generation: int | None = None,
) -> list[Cond]:
    text = "Unknown" if status is None else ("True" if status else "False")
    out: list[Cond] = []
    found = False
    for cond in conditions:
        if cond.get("type") != type_:
            out.append(dict(cond))
            continue
        found = True
        since = cond.get("lastTransitionTime") if cond.get("status") == text else now
        out.append(_make(type_, text, reason, message, since or now, generation))
    if not found:
        out.append(_make(type_, text, reason, message, now, generation))
    return out


def _make(
    type_: str, status: str, reason: str, message: str, since: str, generation: int | None
) -> Cond:
    cond: Cond = {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    }
    if generation is not None:
        cond["observedGeneration"] = generation
    return cond


def get_condition(conditions: Iterable[Mapping[str, Any]], type_: str) -> Mapping[str, Any] | None:
    for cond in conditions:
        if cond.get("type") == type_:
            return cond
    return None


@dataclass(frozen=True)
class Writer:
    """One writer of ``status.conditions``: its field manager and the condition types it
    owns. Each writer applies (server-side) only its own entries of the list map keyed by
    ``type``, so no writer erases or reverts another's."""

    field_manager: str
    types: frozenset[str]
    all_but: bool = False
    """Owns every type except ``types``."""

    def owns(self, type_: str) -> bool:
        return (type_ in self.types) != self.all_but

    def own(self, conditions: Iterable[Mapping[str, Any]]) -> list[Cond]:
        return [dict(c) for c in conditions if self.owns(str(c.get("type")))]


# The election followers (follow/) and the reconciliation (handlers.py).
FOLLOWER = Writer("mqcluster-operator-follower",
                  frozenset({"MasterElected", "Upgrading", "LeaderElected", "Migrating",
                             "Degraded", "Scaling"}))
RECONCILER = Writer("mqcluster-operator-reconciler", FOLLOWER.types, all_but=True)
