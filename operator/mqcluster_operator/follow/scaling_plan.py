"""Scaling a controller-mode group, as pure planning.

Scale down (``spec.replicas`` below the replicas the objects were built for): the
StatefulSet keeps its pods until the plan allows their removal. Never the master
(a switchover to a remaining in-sync replica comes first), never below
``minInSyncReplicas`` members of the SyncStateSet among the remaining replicas (the
scale-down is refused with a Warning Event and ``Scaling=False``, reason
``BelowMinInSyncReplicas``, until the SyncStateSet has grown or the spec changes).
Once the removed pods are gone their replicas are retired from the controller
(CleanBrokerData) and from the name servers (which also drop a broker that stops) and, with
``spec.storage.reclaimPolicy: Delete``, their PVCs are deleted.

Scale up needs no permission: new replicas start empty, copy from the master and join
the SyncStateSet; ``Scaling`` shows how far each one has caught up.

``status.scaling`` records the step (``SwitchingOver``, ``Removing``, ``Done``, or
``Refused``; ``CatchingUp`` while replicas are outside the SyncStateSet), so an
operator restarted at any step resumes from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import names

SWITCHING = "SwitchingOver"
REMOVING = "Removing"
DONE = "Done"
REFUSED = "Refused"
# Steps at which the StatefulSet is rendered with the smaller replica count.
SHRUNK = frozenset({REMOVING, DONE})
# Steps during which nothing else may move the master or restart pods.
UNDER_WAY = frozenset({SWITCHING, REMOVING})


@dataclass(frozen=True)
class ScaleFacts:
    name: str
    """The group (pods are ``<name>-<ordinal>``)."""
    master: str | None
    sync_state_set: Sequence[str]
    pods: Sequence[str]
    """Pods that exist now."""
    broker_ids: Mapping[str, int] = field(default_factory=dict)
    """brokerId of each replica the controller knows, by pod."""
    addresses: Mapping[str, str] = field(default_factory=dict)
    """Address each replica registered with, by pod."""
    offsets: Mapping[str, int] = field(default_factory=dict)
    """maxOffset of each replica, by pod (from its epoch entries)."""
    learners: int = 0
    """The last N replicas run as async learners: they never join the SyncStateSet."""


@dataclass(frozen=True)
class ScaleStep:
    status: dict[str, Any] | None = None
    """New ``status.scaling``; None leaves it, {} removes it."""
    condition: tuple[bool, str, str] | None = None
    """(Scaling?, reason, message)."""
    event: tuple[str, str] | None = None
    switchover_to: str | None = None
    retire: tuple[int, ...] = ()
    """brokerIds to clean from the controller."""
    unregister: tuple[str, ...] = ()
    """Their addresses (one per brokerId in ``retire``), unregistered from the name
    servers."""
    delete_claims: tuple[str, ...] = ()


def ordinal(pod: str) -> int:
    return int(pod.rsplit("-", 1)[1])


def rendered_replicas(wanted: int, applied: int | None,
                      recorded: Mapping[str, Any] | None) -> int:
    """How many replicas the StatefulSet gets: a scale-down waits for its plan."""
    if applied is None or wanted >= applied:
        return wanted
    state = recorded or {}
    if state.get("to") == wanted and state.get("step") in SHRUNK:
        return wanted
    return applied


def plan_scale(wanted: int, applied: int | None, min_in_sync: int, reclaim: str,
               recorded: Mapping[str, Any] | None, facts: ScaleFacts) -> ScaleStep | None:
    """One step; ``applied`` is the replica count the objects were last built for."""
    state = dict(recorded or {})
    step = state.get("step")
    if step == REMOVING and state.get("to") == wanted:
        return removing(reclaim, state, facts)
    if applied is not None and wanted < applied:
        if step == DONE and state.get("to") == wanted:
            return None  # the objects are about to be built for ``wanted``
        return scale_down(wanted, applied, min_in_sync, state, facts)
    if step in (REFUSED, SWITCHING, REMOVING):
        message = f"scale-down given up: spec.replicas is {wanted} again"
        return ScaleStep(status={}, condition=(False, "Cancelled", message),
                         event=("Normal", message))
    return catch_up(wanted, state, facts)


def scale_down(wanted: int, applied: int, min_in_sync: int, state: dict[str, Any],
               facts: ScaleFacts) -> ScaleStep:
    removed = [names.pod(facts.name, i) for i in range(wanted, applied)]
    if state.get("to") != wanted or state.get("step") not in (REFUSED, SWITCHING):
        state = {"to": wanted, "fromReplicas": applied, "removed": removed}
    step = state.get("step")
    remaining_in_sync = [p for p in facts.sync_state_set if ordinal(p) < wanted]
    if len(remaining_in_sync) < min_in_sync:
        why = (f"scaling to {wanted} would leave {len(remaining_in_sync)} SyncStateSet"
               f" member(s) ({', '.join(remaining_in_sync) or 'none'}), fewer than"
               f" minInSyncReplicas {min_in_sync}")
        new = {**state, "step": REFUSED, "progress": why}
        return ScaleStep(status=new if new != state else None,
                         condition=(False, "BelowMinInSyncReplicas", why + "; refused"),
                         event=("Warning", f"scale-down refused: {why}")
                         if step != REFUSED else None)
    if facts.master is not None and facts.master in removed:
        target = min(remaining_in_sync, key=lambda p: facts.broker_ids.get(p, 1 << 30))
        if target not in facts.broker_ids:
            return ScaleStep(condition=(True, SWITCHING, f"{target} has no brokerId yet"))
        new = {**state, "step": SWITCHING, "switchoverTo": target,
               "progress": f"master {facts.master} hands over to {target}"}
        return ScaleStep(
            status=new if new != state else None,
            condition=(True, SWITCHING, f"master {facts.master} is among the removed"
                                        f" replicas; switching over to {target}"),
            event=("Normal", f"scale-down: switching the master over to {target} first")
            if step != SWITCHING else None,
            switchover_to=target if step != SWITCHING else None)
    known = [p for p in removed if p in facts.broker_ids]
    new = {**state, "step": REMOVING, "progress": f"removing {', '.join(removed)}",
           "retire": [facts.broker_ids[p] for p in known],
           "addresses": [facts.addresses.get(p, "") for p in known]}
    new.pop("switchoverTo", None)
    return ScaleStep(status=new,
                     condition=(True, REMOVING, f"removing {', '.join(removed)}"),
                     event=("Normal", f"scale-down to {wanted}: removing {', '.join(removed)}"))


def removing(reclaim: str, state: dict[str, Any], facts: ScaleFacts) -> ScaleStep:
    """The StatefulSet is smaller: wait for the removed pods to go, then retire them."""
    removed = list(state.get("removed") or [])
    left = [p for p in removed if p in facts.pods]
    if left:
        return ScaleStep(condition=(True, REMOVING, f"waiting for {', '.join(left)} to stop"))
    return retire(reclaim, state)


def retire(reclaim: str, state: dict[str, Any]) -> ScaleStep:
    """Retire the removed replicas (idempotent actions; Done recorded after them)."""
    removed = list(state.get("removed") or [])
    claims = tuple(f"data-{p}" for p in removed) if reclaim == "Delete" else ()
    kept = "deleted" if claims else "kept (reclaimPolicy Retain)"
    message = (f"scaled down to {state.get('to')}: {', '.join(removed)} retired from the"
               f" controller; PVCs {kept}")
    return ScaleStep(
        status={**state, "step": DONE, "progress": message},
        condition=(False, "Completed", message),
        event=("Normal", message),
        retire=tuple(int(i) for i in state.get("retire") or []),
        unregister=tuple(str(a) for a in state.get("addresses") or []),
        delete_claims=claims,
    )


def catch_up(wanted: int, state: dict[str, Any], facts: ScaleFacts) -> ScaleStep | None:
    """Replicas not yet in the SyncStateSet, with how far behind the master they are."""
    pods = [names.pod(facts.name, i) for i in range(wanted - facts.learners)]
    behind = [p for p in pods if p not in facts.sync_state_set]
    if not behind:
        if state.get("step") == "CatchingUp":
            return ScaleStep(status={}, condition=(False, "Completed",
                                                   f"all {wanted} replicas in the SyncStateSet"))
        return None
    top = facts.offsets.get(facts.master or "")
    parts = []
    for pod in behind:
        mine = facts.offsets.get(pod)
        if mine is None or top is None:
            parts.append(f"{pod} starting")
        else:
            parts.append(f"{pod} at {mine}/{top}")
    progress = "catching up: " + ", ".join(parts)
    new = {"step": "CatchingUp", "progress": progress}
    return ScaleStep(status=new if new != state else None,
                     condition=(True, "CatchingUp", progress))
