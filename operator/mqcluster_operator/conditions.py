"""Status conditions: set one, keeping lastTransitionTime while the status holds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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


def keep_theirs(
    ours: Iterable[Mapping[str, Any]], live: Iterable[Mapping[str, Any]], theirs: Iterable[str]
) -> list[Cond]:
    """``ours`` with the condition types another writer owns taken from ``live``.

    A status merge patch replaces the whole list: the reconciler and the
    election followers both write ``conditions``, each from its own snapshot.
    """
    owned = set(theirs)
    current = {str(c.get("type")): dict(c) for c in live if c.get("type") in owned}
    out: list[Cond] = []
    for cond in ours:
        type_ = str(cond.get("type"))
        live_cond = current.pop(type_, None) if type_ in owned else None
        out.append(live_cond if live_cond is not None else dict(cond))
    out.extend(current.values())
    return out
