"""DLedger mode: a group of 3 ``mqbroker`` whose commitlog is one Raft log."""

from __future__ import annotations

import asyncio

from chaos.cluster import ChaosCluster
from mqcluster.broker.dledger import PROPERTY_DLEDGER_INDEX, read_status
from mqcluster.store.message import StoredMessage

DLEDGER_PORT = 40911


class DLedgerCluster(ChaosCluster):
    mode = "dledger"
    group = "chaos-d"

    async def start_members(self) -> None:
        hosts = [self.net.add_host(f"b{i}") for i in range(3)]
        peers = ";".join(f"n{i}-{h.address}:{DLEDGER_PORT}" for i, h in enumerate(hosts))
        for i, h in enumerate(hosts):
            self.add_broker(i, h, enableDLegerCommitLog="true", dLegerGroup=self.group,
                            dLegerPeers=peers, dLegerSelfId=f"n{i}",
                            preferredLeaderIds="n0")
        await asyncio.gather(*(b.start() for b in self.brokers))

    async def status(self, i: int) -> dict[str, object] | None:
        if not self.brokers[i].alive or self.brokers[i].stopped:
            return None
        return await read_status(self.rpc, self.broker_addr(i))

    async def master(self) -> int | None:
        for i in range(len(self.brokers)):
            st = await self.status(i)
            if st is not None and st.get("role") == "LEADER":
                return i
        return None

    async def healthy(self) -> bool:
        sts = [await self.status(i) for i in range(len(self.brokers))]
        return (all(s is not None for s in sts)
                and any(s.get("role") == "LEADER" for s in sts if s)
                and len({s["appliedIndex"] for s in sts if s}) == 1)

    async def stop_brokers(self) -> int:
        m = await self.wait_master(30)
        for b in self.brokers:
            await b.terminate()
        return m

    def replicas_identical(self) -> tuple[bool, str]:
        logs = [self.commitlog(i).rstrip(b"\0") for i in range(len(self.brokers))]
        same = all(c == logs[0] for c in logs)
        return same, (f"identical, {len(logs[0])} bytes (all applied to the commit index)"
                      if same else f"commitlogs differ (lengths {[len(c) for c in logs]})")

    def position(self, m: StoredMessage) -> str:
        return m.properties.get(PROPERTY_DLEDGER_INDEX) or str(m.queue_offset)
