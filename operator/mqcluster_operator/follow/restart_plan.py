"""Rolling restart asked for by the ``mqcluster.io/restart`` annotation (pure planning).

Pods are deleted one at a time, slaves first and the master last, each only
when every pod is back and Ready; the StatefulSet (OnDelete) recreates them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .election_plan import PodInfo


@dataclass(frozen=True)
class RestartStep:
    delete: str | None
    status: dict[str, Any] | None
    """New ``status.restart`` (None: unchanged)."""
    done: bool = False


def plan_restart(
    requested: str | None,
    current: Mapping[str, Any] | None,
    pods: Sequence[PodInfo],
    replicas: int,
    master: str | None,
) -> RestartStep:
    current = dict(current or {})
    if not requested or current.get("completed") == requested:
        return RestartStep(None, None)
    if current.get("requested") != requested:
        order = sorted(p.name for p in pods if p.name != master)
        order += [p.name for p in pods if p.name == master]
        current = {"requested": requested, "pending": order, "deleted": {}}
        return RestartStep(None, current)
    by_name = {p.name: p for p in pods}
    deleted: dict[str, str] = dict(current.get("deleted") or {})
    settled = (
        len(pods) >= replicas
        and all(p.ready and not p.terminating for p in pods)
        and all(by_name.get(n) is not None and by_name[n].uid != uid for n, uid in deleted.items())
    )
    if not settled:
        return RestartStep(None, None)
    pending = list(current.get("pending") or [])
    if not pending:
        return RestartStep(None, {"completed": requested}, done=True)
    victim = pending.pop(0)
    uid = by_name[victim].uid if victim in by_name else ""
    return RestartStep(
        victim, {"requested": requested, "pending": pending, "deleted": {victim: uid}}
    )
