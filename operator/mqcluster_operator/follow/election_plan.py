"""Following elections: who is master, relabel pods ``role=master|slave``, report it.

The pure part: the election state (``Election``, ``ReplicaState``), the seam to
the cluster (``ControllerProbe``; implementations in ``election_probes``), and
``plan_follow``: election + pods + previous status in, relabels, a status patch and
an optional MasterChanged event out. The I/O is in ``following`` (the step) and
``election_poller`` (one shared poll per controller cluster).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from mqcluster.protocol.election import Election

from .. import conditions, names
from ..events import REASON_MASTER_CHANGED
from .epochs_plan import ReplicaEpochs

MASTER_ROLES = frozenset({"SYNC_MASTER", "ASYNC_MASTER"})


@dataclass(frozen=True)
class ControllerMeta:
    active: str | None
    term: int | None
    members: tuple[str, ...] = ()


class ProbeError(Exception):
    """The probe could not learn the election state (controller or pods unreachable)."""


class ControllerProbe(Protocol):
    async def metadata(self) -> ControllerMeta: ...

    async def election(self, cluster: str, broker_name: str) -> Election: ...

    async def elections(self, broker_names: Sequence[str]) -> dict[str, Election]:
        """Every named group in one request; groups the cluster does not know have no master."""
        ...

    async def switchover(self, cluster: str, broker_name: str, broker_id: int) -> None: ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class PodInfo:
    name: str
    ip: str | None = None
    role: str | None = None
    ready: bool = False
    uid: str = ""
    terminating: bool = False
    stuck: str | None = None
    """Why the pod cannot serve whatever happens (CrashLoopBackOff, ImagePullBackOff,
    ErrImagePull, Unschedulable); None when it is running or just starting."""

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> PodInfo:
        meta, status = pod.get("metadata", {}), pod.get("status", {})
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions", [])
        )
        return cls(
            name=meta["name"],
            ip=status.get("podIP"),
            role=meta.get("labels", {}).get(names.LABEL_ROLE),
            ready=ready,
            uid=meta.get("uid", ""),
            terminating=bool(meta.get("deletionTimestamp")),
            stuck=stuck_reason(status),
        )


STUCK_REASONS = frozenset({"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull",
                           "InvalidImageName", "CreateContainerConfigError"})


def stuck_reason(status: Mapping[str, Any]) -> str | None:
    """A waiting container's reason that will not clear by itself, or Unschedulable."""
    for container in status.get("containerStatuses") or []:
        reason = ((container.get("state") or {}).get("waiting") or {}).get("reason")
        if reason in STUCK_REASONS:
            return str(reason)
    if status.get("phase") == "Pending":
        for cond in status.get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("reason") == "Unschedulable":
                return "Unschedulable"
    return None


def pod_for_address(address: str | None, pods: Sequence[PodInfo]) -> str | None:
    """``bg-1.bg-headless.ns.svc:10911`` or ``10.0.0.7:10911`` -> the pod's name."""
    if not address:
        return None
    host = address.rsplit(":", 1)[0] if ":" in address else address
    label = host.split(".", 1)[0]
    for pod in pods:
        if pod.name == label or pod.ip == host:
            return pod.name
    return None


@dataclass(frozen=True)
class FollowPlan:
    master_pod: str | None
    relabels: tuple[tuple[str, str], ...]
    status: dict[str, Any]
    event: tuple[str, str, str] | None = None
    changed: bool = False


def plan_follow(
    status: Mapping[str, Any],
    election: Election,
    pods: Sequence[PodInfo],
    now: str,
    epochs: Mapping[str, ReplicaEpochs] | None = None,
) -> FollowPlan:
    """Labels, status and event for ``election``; ``epochs`` (by pod, read from the
    brokers) go into ``status.replicas``."""
    master = pod_for_address(election.master_address, pods)
    demote = [(p.name, names.ROLE_SLAVE) for p in pods
              if p.name != master and p.role != names.ROLE_SLAVE]
    promote = [(p.name, names.ROLE_MASTER) for p in pods
               if p.name == master and p.role != names.ROLE_MASTER]
    replicas: list[dict[str, Any]] = []
    for r in election.replicas:
        pod = pod_for_address(r.address, pods)
        replicas.append({
            "pod": pod or r.address,
            "brokerId": r.broker_id,
            "address": r.address,
            "role": "master" if pod is not None and pod == master else "slave",
            "inSync": r.in_sync,
            "alive": r.alive,
        })
        read = (epochs or {}).get(pod or "")
        if read is not None:
            replicas[-1].update(maxOffset=read.max_offset, epochs=read.status())
    in_sync = [str(rep["pod"]) for rep in replicas if rep["inSync"]]
    if master:
        cond = ("MasterElected", True, "MasterElected",
                f"master is {master} (epoch {election.master_epoch})")
    else:
        why = "no master elected" if not election.master_address else (
            f"master {election.master_address} is not a pod of this group")
        cond = ("MasterElected", False, "NoMaster", why)
    new_status: dict[str, Any] = {
        "masterPod": master,
        "masterAddress": election.master_address,
        "masterEpoch": election.master_epoch,
        "syncStateSet": in_sync,
        "syncStateSetEpoch": election.sync_state_set_epoch,
        "activeController": election.active_controller,
        "replicas": replicas,
        "conditions": conditions.set_condition(
            status.get("conditions", []), cond[0], cond[1], cond[2], cond[3], now
        ),
    }
    previous = status.get("masterPod")
    changed = previous != master or (
        master is not None and status.get("masterEpoch") != election.master_epoch
    )
    event = None
    if changed and (master or previous):
        if master:
            message = (f"master changed from {previous or 'none'} to {master}"
                       f" (epoch {election.master_epoch})")
            event = ("Normal", REASON_MASTER_CHANGED, message)
        else:
            event = ("Warning", REASON_MASTER_CHANGED, f"master {previous} lost: {cond[3]}")
    return FollowPlan(master, tuple(demote + promote), new_status, event, changed)


def switchover_target(
    requested: str, status: Mapping[str, Any]
) -> tuple[int | None, str | None]:
    """(brokerId, None) of the pod named by switchover-to, or (None, why not)."""
    if requested == status.get("masterPod"):
        return None, f"{requested} is already the master"
    for rep in status.get("replicas", []):
        if rep.get("pod") == requested:
            if not rep.get("inSync"):
                return None, f"{requested} is not in the SyncStateSet"
            if rep.get("brokerId") is None:
                return None, f"{requested} has no brokerId yet"
            return int(rep["brokerId"]), None
    return None, f"{requested} is not a replica of this group"
