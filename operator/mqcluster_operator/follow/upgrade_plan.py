"""Rolling upgrade of a broker group (StatefulSet ``OnDelete``), as pure planning.

Pods whose ``controller-revision-hash`` differs from the StatefulSet's
``updateRevision`` are outdated. The rules, in order:

- ``spec.upgrade.paused`` holds the roll (Upgrading=False, PausedByUser).
- A roll does not start while the group is degraded: a pod missing or not Ready,
  or (controller mode) a SyncStateSet smaller than ``minInSyncReplicas + 1``.
  Outdated pods that cannot serve anyway (``PodInfo.stuck``) do not count: they
  are what a new revision often fixes.
- Outdated stuck pods are replaced first, without waiting for them.
- Otherwise one pod at a time: the next only when every pod is back, Ready, (unless
  an async learner) in the SyncStateSet and caught up (commitlog max offset within
  ``maxLagBytes`` of the master's, when the offsets are known). Slaves go first.
- Then the master hands over to an upgraded, in-sync slave: controller mode asks the
  controller (``switchover_to``), DLedger mode the leader (``transfer_to``); the old
  master, now a slave, goes last, once the pods' ``role`` labels (which the client
  Service selects by) name the new master. Master-slave mode has no failover: its master is
  deleted last.
- A wait longer than its timeout pauses the roll (Upgrading=False,
  PausedStepTimeout, one Warning Event). It goes on by itself once the step
  converges; ``mqcluster.io/upgrade: resume`` gives the step a new timeout (and asks
  for a handover again).

Everything the planner needs to resume is in ``status.upgrade``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .. import names
from ..models import BrokerGroupSpec
from .election_plan import PodInfo

REVISION_LABEL = "controller-revision-hash"
PAUSED_TIMEOUT = "PausedStepTimeout"
HANDOVER_RETRY_SECONDS = 10.0
"""A handover that has not happened is asked for again this often (until the step's
timeout): a DLedger leader abandons a transfer after a second, e.g. when its target
was briefly unreachable."""
HANDOVER_KEYS = ("switchoverTo", "transferTo", "askedAt")
RESUME = "resume"


@dataclass(frozen=True)
class UpgradeStep:
    delete: str | None = None
    switchover_to: str | None = None
    """Controller mode: ask the controller to elect this pod."""
    transfer_to: str | None = None
    """DLedger mode: ask the leader to transfer leadership to this pod."""
    status: dict[str, Any] | None = None
    """New ``status.upgrade`` (None: unchanged; {}: cleared)."""
    condition: tuple[bool, str, str] | None = None
    """(Upgrading?, reason, message) for the Upgrading condition."""
    events: tuple[tuple[str, str], ...] = ()
    """(type, message) of each ``Upgrade`` Event to post."""
    clear_resume: bool = False
    """Remove the ``mqcluster.io/upgrade`` annotation (it has been acted on)."""


def learners(spec: BrokerGroupSpec, name: str) -> set[str]:
    if spec.mode != "Controller":
        return set()
    first = spec.replicas - spec.asyncLearnerReplicas
    return {f"{name}-{i}" for i in range(first, spec.replicas)}


def plan_upgrade(
    spec: BrokerGroupSpec,
    name: str,
    update_revision: str | None,
    pods: Sequence[PodInfo],
    revisions: Mapping[str, str],
    status: Mapping[str, Any],
    now: float,
    offsets: Mapping[str, int] | None = None,
    resume: bool = False,
) -> UpgradeStep:
    """The next step of a roll. ``offsets``: commitlog max offset per pod that answered
    (None: not asked, the catch-up check is skipped); ``resume``: the annotation is set."""
    state = dict(status.get("upgrade") or {})
    if not update_revision:
        return UpgradeStep()
    outdated = sorted(p.name for p in pods if revisions.get(p.name) != update_revision)
    upgraded = min(len(pods) - len(outdated), spec.replicas)
    progress = f"{upgraded}/{spec.replicas} pods upgraded"
    if not outdated and len(pods) >= spec.replicas:
        if state:
            # every pod at the new revision is not yet a finished roll: the last one
            # restarted is done only once it is back and Ready
            waiting = unfinished(pods, state)
            if waiting is not None:
                return UpgradeStep(status={**state, "progress": progress}, condition=(
                    True, "Waiting", f"{waiting} ({progress})"))
            return UpgradeStep(
                status={}, condition=(False, "UpToDate", f"all pods at revision {update_revision}"),
                events=(("Normal",
                         f"upgrade to revision {update_revision} completed: {progress}"),),
                clear_resume=resume)
        return UpgradeStep(clear_resume=resume)
    if not outdated and not state:
        return UpgradeStep()  # a missing pod comes back at the new revision: nothing to roll
    if spec.upgradePolicy.strategy == "Manual":
        return UpgradeStep(condition=(True, "ManualUpgrade",
                                      f"waiting for pods to be deleted: {', '.join(outdated)}"))
    if spec.upgrade.paused:
        held = {**state, "progress": progress} if state else None
        return UpgradeStep(status=held, condition=(
            False, "PausedByUser", f"spec.upgrade.paused is set ({progress})"))
    master = status.get("masterPod")
    in_sync = set(status.get("syncStateSet") or [])
    started: tuple[tuple[str, str], ...] = ()
    if state.get("revision") != update_revision:
        if not state.get("revision"):
            why = degraded(spec, name, pods, outdated, in_sync, master)
            if why:
                return UpgradeStep(condition=(
                    False, "Degraded", f"not starting the upgrade to {update_revision}: {why}"))
        started = (("Normal", f"upgrade to revision {update_revision} started ({progress})"),)
        state = {"revision": update_revision, "since": now, "deleted": {}}
    state["progress"] = progress
    if resume:  # a new timeout; a handover that never happened is asked for again
        state["since"] = now
        for key in ("paused", *HANDOVER_KEYS):
            state.pop(key, None)
    step = next_step(spec, name, pods, outdated, state, in_sync, master, offsets, now)
    return UpgradeStep(
        delete=step.delete, switchover_to=step.switchover_to, transfer_to=step.transfer_to,
        status=step.status, condition=step.condition, events=started + step.events,
        clear_resume=resume,
    )


def next_step(
    spec: BrokerGroupSpec, name: str, pods: Sequence[PodInfo], outdated: list[str],
    state: dict[str, Any], in_sync: set[str], master: str | None,
    offsets: Mapping[str, int] | None, now: float,
) -> UpgradeStep:
    progress = state["progress"]
    by_name = {p.name: p for p in pods}
    stuck = [by_name[p] for p in outdated if by_name[p].stuck and not by_name[p].terminating]
    if stuck:
        broken = stuck[0]
        return UpgradeStep(
            delete=broken.name, status={**state, "since": now},
            condition=(True, "ReplacingStuckPod",
                       f"replacing {broken.name} ({broken.stuck}) without waiting ({progress})"),
            events=(("Normal", f"upgrade: replacing {broken.name}, which cannot serve"
                               f" ({broken.stuck})"),))
    why = settled_pods(spec, name, pods, state, in_sync, master, offsets)
    if why is not None:
        return stalled(spec, state, now, why)
    state.pop("paused", None)
    slaves = [p for p in outdated if p != master]
    if slaves:
        victim = slaves[0]
        new = {**state, "since": now, "deleted": {victim: by_name[victim].uid}}
        for key in HANDOVER_KEYS:
            new.pop(key, None)
        return UpgradeStep(delete=victim, status=new,
                           condition=(True, "RestartingSlave", f"restarting {victim} ({progress})"),
                           events=(("Normal", f"upgrade: restarting slave {victim} ({progress})"),))
    if master not in outdated:
        return UpgradeStep(status=state)
    assert master is not None
    if spec.mode == "MasterSlave":
        new = {**state, "since": now, "deleted": {master: by_name[master].uid}}
        return UpgradeStep(delete=master, status=new, condition=(
                               True, "RestartingMaster", f"restarting {master} ({progress})"),
                           events=(("Normal",
                                    f"upgrade: restarting master {master} ({progress})"),))
    asked = state.get("switchoverTo") or state.get("transferTo")
    if asked:
        waited = stalled(spec, state, now, f"waiting for {asked} to become master",
                         spec.upgradePolicy.switchoverTimeoutSeconds)
        asked_at = float(state.get("askedAt", state.get("since", now)))
        if (waited.status or state).get("paused") or now - asked_at < HANDOVER_RETRY_SECONDS:
            return waited
        # asked again; the step's timeout still counts from the first request
        return replace(waited, status={**(waited.status or state), "askedAt": now},
                       switchover_to=asked if spec.mode == "Controller" else None,
                       transfer_to=asked if spec.mode == "DLedger" else None)
    candidates = sorted(
        p.name for p in pods
        if p.name != master and p.name not in outdated and p.name not in learners(spec, name)
        and (spec.mode != "Controller" or p.name in in_sync)
    )
    if not candidates:
        return stalled(spec, state, now, "no upgraded in-sync slave to hand the master over to")
    target = candidates[0]
    field, what = (("switchoverTo", "switching the master over to")
                   if spec.mode == "Controller" else ("transferTo", "transferring leadership to"))
    return UpgradeStep(
        switchover_to=target if spec.mode == "Controller" else None,
        transfer_to=target if spec.mode == "DLedger" else None,
        status={**state, "since": now, "askedAt": now, field: target},
        condition=(True, "Switchover", f"{what} {target} ({progress})"),
        events=(("Normal", f"upgrade: {what} {target}"),),
    )


def unfinished(pods: Sequence[PodInfo], state: Mapping[str, Any]) -> str | None:
    """Why a roll whose pods are all at the new revision has not finished, or None."""
    by_name = {p.name: p for p in pods}
    for pod_name, uid in (state.get("deleted") or {}).items():
        pod = by_name.get(pod_name)
        if pod is None or pod.uid == uid:
            return f"waiting for {pod_name} to be recreated"
    waiting = sorted(p.name for p in pods if not p.ready or p.terminating)
    if waiting:
        return f"waiting for {', '.join(waiting)} to be Ready"
    return None


def degraded(
    spec: BrokerGroupSpec, name: str, pods: Sequence[PodInfo], outdated: Sequence[str],
    in_sync: set[str], master: str | None,
) -> str | None:
    """Why the group is too weak to start a roll, or None. Outdated stuck pods are
    left out: replacing them is part of the roll."""
    if len(pods) < spec.replicas:
        return f"{spec.replicas - len(pods)} pod(s) missing"
    replaced = {p.name for p in pods if p.stuck and p.name in outdated}
    not_ready = sorted(p.name for p in pods
                       if (not p.ready or p.terminating) and p.name not in replaced)
    if not_ready:
        return f"{', '.join(not_ready)} not Ready"
    if spec.mode == "Controller":
        if master is None:
            return "no master"
        voters = spec.replicas - spec.asyncLearnerReplicas
        need = min(spec.minInSyncReplicas + 1, voters)
        if len(in_sync) < need:
            return f"SyncStateSet has {len(in_sync)} member(s), fewer than {need}" \
                   f" (minInSyncReplicas + 1)"
    return None


def settled_pods(
    spec: BrokerGroupSpec, name: str, pods: Sequence[PodInfo], state: Mapping[str, Any],
    in_sync: set[str], master: str | None, offsets: Mapping[str, int] | None = None,
) -> str | None:
    """Why the group is not ready for the next step, or None."""
    if len(pods) < spec.replicas:
        return f"{spec.replicas - len(pods)} pod(s) missing"
    waiting = unfinished(pods, state)
    if waiting is not None:
        return waiting
    if spec.mode == "Controller" and master is not None:
        behind = sorted(p.name for p in pods
                        if p.name not in in_sync and p.name not in learners(spec, name))
        if behind:
            return f"waiting for {', '.join(behind)} to rejoin the SyncStateSet"
    # the client Service selects role=master: after a handover, the old master goes only
    # once the Service has followed
    if master is not None and any((p.role == names.ROLE_MASTER) != (p.name == master)
                                  for p in pods):
        return f"waiting for the client Service to select {master}"
    if offsets is not None and master is not None and spec.mode != "MasterSlave":
        return lagging(spec, pods, master, offsets)
    return None


def lagging(
    spec: BrokerGroupSpec, pods: Sequence[PodInfo], master: str, offsets: Mapping[str, int],
) -> str | None:
    if master not in offsets:
        return f"waiting for the offset of master {master}"
    gaps = []
    for pod in sorted(p.name for p in pods if p.name != master):
        if pod not in offsets:
            return f"waiting for the offset of {pod}"
        gap = offsets[master] - offsets[pod]
        if gap > spec.upgradePolicy.maxLagBytes:
            gaps.append(f"{pod} {gap} bytes")
    if gaps:
        return f"waiting for slaves to catch up ({', '.join(gaps)} behind; maxLagBytes" \
               f" {spec.upgradePolicy.maxLagBytes})"
    return None


def stalled(
    spec: BrokerGroupSpec, state: dict[str, Any], now: float, why: str,
    timeout: float | None = None,
) -> UpgradeStep:
    limit = timeout if timeout is not None else spec.upgradePolicy.catchUpTimeoutSeconds
    since = float(state.get("since", now))
    if now - since <= limit:
        return UpgradeStep(status=state, condition=(True, "Waiting",
                                                    f"{why} ({state['progress']})"))
    message = (f"paused: {why} for more than {limit:g}s ({state['progress']}); it goes on"
               f" once this converges, or annotate mqcluster.io/upgrade=resume to wait again")
    events = () if state.get("paused") else (("Warning", message),)
    return UpgradeStep(status={**state, "paused": PAUSED_TIMEOUT},
                       condition=(False, PAUSED_TIMEOUT, message), events=events)
