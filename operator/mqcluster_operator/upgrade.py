"""Rolling upgrade of a broker group (StatefulSet ``OnDelete``), as pure planning.

Pods whose ``controller-revision-hash`` differs from the StatefulSet's
``updateRevision`` are outdated. Slaves go first, one at a time; the next only
when every pod is back, Ready and (unless an async learner) in the
SyncStateSet. Then, in controller mode, a switchover to an up-to-date in-sync
slave; the old master, now a slave, goes last. Other modes delete the master
last without a switchover (master-slave has no failover; DLedger re-elects).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .election_plan import PodInfo
from .models import BrokerGroupSpec

REVISION_LABEL = "controller-revision-hash"


@dataclass(frozen=True)
class UpgradeStep:
    delete: str | None = None
    switchover_to: str | None = None
    status: dict[str, Any] | None = None
    """New ``status.upgrade`` (None: unchanged)."""
    condition: tuple[bool, str, str] | None = None
    """(Upgrading?, reason, message) for the Upgrading condition."""


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
) -> UpgradeStep:
    state = dict(status.get("upgrade") or {})
    if not update_revision:
        return UpgradeStep()
    outdated = sorted(p.name for p in pods if revisions.get(p.name) != update_revision)
    if not outdated and len(pods) >= spec.replicas:
        if state:
            return UpgradeStep(status={}, condition=(False, "UpToDate",
                                                     f"all pods at revision {update_revision}"))
        return UpgradeStep()
    if spec.upgradePolicy.strategy == "Manual":
        return UpgradeStep(condition=(True, "ManualUpgrade",
                                      f"waiting for pods to be deleted: {', '.join(outdated)}"))
    if state.get("revision") != update_revision:
        state = {"revision": update_revision, "since": now, "deleted": {}}
    master = status.get("masterPod")
    in_sync = set(status.get("syncStateSet") or [])
    settled = settled_pods(spec, name, pods, state, in_sync, master)
    if settled is not None:
        return stalled(spec, state, now, settled)
    slaves = [p for p in outdated if p != master]
    by_name = {p.name: p for p in pods}
    if slaves:
        victim = slaves[0]
        new = {**state, "since": now, "deleted": {victim: by_name[victim].uid}}
        new.pop("switchoverTo", None)
        return UpgradeStep(delete=victim, status=new,
                           condition=(True, "RestartingSlave", f"restarting {victim}"))
    if master not in outdated:
        return UpgradeStep(status=state)
    if spec.mode != "Controller":
        new = {**state, "since": now, "deleted": {master: by_name[master].uid}}
        return UpgradeStep(delete=master, status=new,
                           condition=(True, "RestartingMaster", f"restarting {master}"))
    if state.get("switchoverTo"):
        return stalled(spec, state, now, f"waiting for {state['switchoverTo']} to become master",
                       spec.upgradePolicy.switchoverTimeoutSeconds)
    candidates = sorted(
        p for p in in_sync
        if p != master and p not in outdated and p not in learners(spec, name)
    )
    if not candidates:
        return stalled(spec, state, now, "no up-to-date in-sync slave to switch over to")
    target = candidates[0]
    return UpgradeStep(
        switchover_to=target, status={**state, "since": now, "switchoverTo": target},
        condition=(True, "Switchover", f"switching the master over to {target}"),
    )


def settled_pods(
    spec: BrokerGroupSpec, name: str, pods: Sequence[PodInfo], state: Mapping[str, Any],
    in_sync: set[str], master: str | None,
) -> str | None:
    """Why the group is not ready for the next step, or None."""
    if len(pods) < spec.replicas:
        return f"{spec.replicas - len(pods)} pod(s) missing"
    by_name = {p.name: p for p in pods}
    for pod_name, uid in (state.get("deleted") or {}).items():
        pod = by_name.get(pod_name)
        if pod is None or pod.uid == uid:
            return f"waiting for {pod_name} to be recreated"
    waiting = sorted(p.name for p in pods if not p.ready or p.terminating)
    if waiting:
        return f"waiting for {', '.join(waiting)} to be Ready"
    if spec.mode == "Controller" and master is not None:
        behind = sorted(p.name for p in pods
                        if p.name not in in_sync and p.name not in learners(spec, name))
        if behind:
            return f"waiting for {', '.join(behind)} to rejoin the SyncStateSet"
    return None


def stalled(
    spec: BrokerGroupSpec, state: dict[str, Any], now: float, why: str,
    timeout: float | None = None,
) -> UpgradeStep:
    limit = timeout if timeout is not None else spec.upgradePolicy.catchUpTimeoutSeconds
    since = float(state.get("since", now))
    reason = "Stalled" if now - since > limit else "Waiting"
    return UpgradeStep(status=state, condition=(True, reason, why))
