"""The probes of the election state: ``RemotingControllerProbe`` asks the active
controller; ``HealthProbe`` reads each broker's ``/health`` (DLedger and master-slave
groups). ``default_probe`` picks one for a ``ProbeTarget``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from mqcluster.protocol.election import Election, ReplicaState, election_of

from .election_plan import MASTER_ROLES, ControllerMeta, ControllerProbe, ProbeError


class RemotingControllerProbe:
    """Asks the controllers over the remoting protocol (mqcluster.client.controller)."""

    def __init__(self, addrs: Sequence[str], timeout: float = 2.0) -> None:
        from mqcluster.client.controller import ControllerClient

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
        return {name: election_of(table.replicas_info_table.get(name), active)
                for name in broker_names}

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
