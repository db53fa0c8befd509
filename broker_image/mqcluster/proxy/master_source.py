"""Where a proxy learns who the group's master is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from mqcluster.controller.client import ControllerClient
from mqcluster.namesrv.client import NamesrvClient

MASTER_ID = 0


@dataclass(frozen=True)
class MasterSighting:
    address: str | None
    """Internal RPC address of the master (None: the group has none right now)."""
    epoch: int
    """Controller mode: the master epoch; 0 where there is none (newer always wins)."""
    grpc: str | None = None
    """The master's gRPC endpoint when the source knows it."""


class MasterSource(Protocol):
    async def master(self) -> MasterSighting: ...

    async def close(self) -> None: ...


class ControllerMasterSource:
    """The active controller's replica info: authoritative, and first to know."""

    def __init__(self, controller_addr: str, broker_name: str) -> None:
        self.broker_name = broker_name
        self.client = ControllerClient(controller_addr, timeout=1.0, retry_timeout=1.0)

    async def master(self) -> MasterSighting:
        info = await self.client.get_replica_info(self.broker_name)
        return MasterSighting(info.master_address or None, info.master_epoch)

    async def close(self) -> None:
        await self.client.close()


class NamesrvMasterSource:
    """The group's brokerId 0 as the name servers have it (DLedger, master-slave)."""

    def __init__(self, namesrv_addr: str, broker_name: str) -> None:
        self.broker_name = broker_name
        self.client = NamesrvClient(namesrv_addr)

    async def master(self) -> MasterSighting:
        info = await self.client.get_cluster_info()
        data = info.brokerAddrTable.get(self.broker_name)
        if data is None:
            return MasterSighting(None, 0)
        return MasterSighting(data.brokerAddrs.get(MASTER_ID), 0,
                              data.proxyAddrs.get(MASTER_ID))

    async def close(self) -> None:
        await self.client.close()
