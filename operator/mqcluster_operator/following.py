"""Following elections: who is master, relabel pods ``role=master|slave``, report it.

``ControllerProbe`` is the seam to the cluster: the real one asks the active
controller (RIP-44 GET_SYNC_STATE_DATA / GET_METADATA_INFO); for DLedger and
master-slave groups ``HealthProbe`` reads each pod's ``/health`` (brokerRole).
``plan_follow`` is pure: election + pods + previous status in, relabels, a status
patch and an optional MasterChanged event out. ``follow_once`` does the I/O.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp

from . import conditions, names
from .events import REASON_MASTER_CHANGED

MASTER_ROLES = frozenset({"SYNC_MASTER", "ASYNC_MASTER"})


@dataclass(frozen=True)
class ReplicaState:
    broker_id: int | None
    address: str
    alive: bool = True
    in_sync: bool = False


@dataclass(frozen=True)
class Election:
    """What the cluster says about one broker group."""

    master_address: str | None
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None
    replicas: tuple[ReplicaState, ...] = ()
    active_controller: str | None = None


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
        )


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
) -> FollowPlan:
    master = pod_for_address(election.master_address, pods)
    demote = [(p.name, names.ROLE_SLAVE) for p in pods
              if p.name != master and p.role != names.ROLE_SLAVE]
    promote = [(p.name, names.ROLE_MASTER) for p in pods
               if p.name == master and p.role != names.ROLE_MASTER]
    replicas = []
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


# ----------------------------------------------------------------------------- probes


class RemotingControllerProbe:
    """Asks the controllers over the remoting protocol (mqcluster.controller.client)."""

    def __init__(self, addrs: Sequence[str], timeout: float = 2.0) -> None:
        from mqcluster.controller.client import ControllerClient

        self.addrs = tuple(addrs)
        self._client = ControllerClient(list(addrs), timeout=timeout, retry_timeout=timeout)

    async def metadata(self) -> ControllerMeta:
        term: int | None = None
        active: str | None = None
        members: list[str] = []
        for addr in self.addrs:
            try:
                meta = await self._client.get_metadata(addr)
            except Exception:
                continue
            members.append(addr)
            if meta.is_leader:
                active = addr
            elif meta.leader_addr and active is None:
                active = meta.leader_addr
            term = max(term or 0, meta.term)
        if not members:
            raise ProbeError(f"no controller answered ({', '.join(self.addrs)})")
        return ControllerMeta(active, term, tuple(members))

    async def election(self, cluster: str, broker_name: str) -> Election:
        return (await self.elections([broker_name]))[broker_name]

    async def elections(self, broker_names: Sequence[str]) -> dict[str, Election]:
        try:
            table = await self._client.get_sync_state_data(list(broker_names))
        except Exception as exc:
            raise ProbeError(f"controller: {exc}") from exc
        active = self._client.active
        out: dict[str, Election] = {}
        for name in broker_names:
            info = table.replicas_info_table.get(name)
            if info is None:
                out[name] = Election(None, active_controller=active)
                continue
            groups = ((info.in_sync_replicas, True), (info.not_in_sync_replicas, False))
            replicas = tuple(
                ReplicaState(r.broker_id, r.broker_address, r.alive, in_sync)
                for group, in_sync in groups
                for r in group
            )
            out[name] = Election(
                info.master_address or None, info.master_epoch, info.sync_state_set_epoch,
                replicas, active,
            )
        return out

    async def switchover(self, cluster: str, broker_name: str, broker_id: int) -> None:
        await self._client.elect_master(cluster, broker_name, broker_id, designate=True)

    async def close(self) -> None:
        await self._client.close()


@dataclass
class HealthProbe:
    """DLedger and master-slave groups: each pod's ``/health`` says its brokerRole."""

    targets: Sequence[tuple[str, str]]
    """(broker address, health URL) of every replica."""
    timeout: float = 2.0
    _session: aiohttp.ClientSession | None = field(default=None, init=False)

    async def metadata(self) -> ControllerMeta:
        return ControllerMeta(None, None)

    async def _health(self, url: str) -> Mapping[str, Any] | None:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        try:
            async with self._session.get(url) as resp:
                data = json.loads(await resp.text())
                return data if isinstance(data, dict) else None
        except (TimeoutError, aiohttp.ClientError, ValueError):
            return None

    async def election(self, cluster: str, broker_name: str) -> Election:
        answers = await asyncio.gather(*(self._health(url) for _, url in self.targets))
        if not any(answers):
            raise ProbeError("no broker answered /health")
        master: str | None = None
        replicas = []
        for (address, _), answer in zip(self.targets, answers, strict=True):
            data: Mapping[str, Any] = answer or {}
            alive = data.get("status") == "UP"
            if alive and data.get("brokerRole") in MASTER_ROLES and master is None:
                master = address
            broker_id = data.get("brokerId")
            replicas.append(ReplicaState(broker_id if isinstance(broker_id, int) else None,
                                         address, alive, alive))
        return Election(master, None, None, tuple(replicas))

    async def elections(self, broker_names: Sequence[str]) -> dict[str, Election]:
        return {name: await self.election("", name) for name in broker_names}

    async def switchover(self, cluster: str, broker_name: str, broker_id: int) -> None:
        raise ProbeError("switchover needs controller mode")

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


@dataclass(frozen=True)
class ProbeTarget:
    """Where to learn the election state: controllers, or the brokers' health endpoints."""

    controller_addrs: tuple[str, ...] = ()
    health: tuple[tuple[str, str], ...] = ()


def default_probe(target: ProbeTarget) -> ControllerProbe:
    if target.controller_addrs:
        return RemotingControllerProbe(target.controller_addrs)
    return HealthProbe(target.health)
