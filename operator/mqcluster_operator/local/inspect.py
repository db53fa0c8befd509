"""Who leads each local group: the controllers' view, or each DLedger replica's own."""

from __future__ import annotations

from dataclasses import dataclass

from mqcluster.client.controller import ControllerClient
from mqcluster.client.dledger import DLedgerClient

from .runner import Running


@dataclass(frozen=True)
class GroupState:
    group: str
    mode: str
    master: str | None
    """Process name of the master (leader), None while there is none."""
    in_sync: tuple[str, ...]
    epoch: int
    """Master epoch (controller mode) or Raft term (DLedger)."""


async def group_state(replicas: list[Running]) -> GroupState:
    first = replicas[0]
    by_addr = {r.addr: r.name for r in replicas}
    if first.props.get("enableControllerMode") == "true":
        name = first.props["brokerName"]
        client = ControllerClient(first.props["controllerAddr"], timeout=1.0, retry_timeout=2.0)
        try:
            info = (await client.get_sync_state_data([name])).replicas_info_table.get(name)
        finally:
            await client.close()
        if info is None:
            return GroupState(first.group, "Controller", None, (), 0)
        in_sync = tuple(sorted(by_addr[r.broker_address] for r in info.in_sync_replicas
                               if r.broker_address in by_addr))
        return GroupState(first.group, "Controller", by_addr.get(info.master_address or ""),
                          in_sync, info.master_epoch)
    leader, term, followers = None, 0, []
    dledger = DLedgerClient(connect_timeout=0.5)
    try:
        for r in replicas:
            if not r.alive:
                continue
            status = await dledger.status(r.addr, 1.0)
            if status is None:
                continue
            if status.get("role") == "LEADER":
                leader, term = r.name, int(status.get("term", 0))
            else:
                followers.append(r.name)
    finally:
        await dledger.close()
    in_sync = tuple(sorted([*([leader] if leader else []), *followers]))
    return GroupState(first.group, "DLedger", leader, in_sync, term)

