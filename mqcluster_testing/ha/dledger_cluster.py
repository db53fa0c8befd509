"""A DLedger-mode group as real processes: ``mqnamesrv`` and N ``mqbroker``s."""

from __future__ import annotations

import asyncio
from pathlib import Path

from mqcluster.client.dledger import read_status
from mqcluster.wire.rpc import RpcClient
from mqcluster_testing.broker.procs import BrokerProc, NamesrvProc, start_broker, start_namesrv
from mqcluster_testing.ha.brokers import BrokerProcesses
from mqcluster_testing.procs import free_addr


class DLedgerProcessGroup(BrokerProcesses):
    def __init__(self, tmp: Path, size: int = 3, **props: str) -> None:
        self.tmp = tmp
        self.ids = [f"n{i}" for i in range(size)]
        self.ips = [free_addr().rsplit(":", 1)[0] for _ in range(size)]
        self.peers = ";".join(f"{n}-{free_addr(ip)}" for n, ip in zip(self.ids, self.ips,
                                                                      strict=True))
        self.props = props
        self.namesrv: NamesrvProc | None = None
        self.brokers: list[BrokerProc] = []
        self.rpc = RpcClient(connect_timeout=0.5)

    async def start(self) -> None:
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.namesrv = await start_namesrv(self.tmp)
        for n, ip in zip(self.ids, self.ips, strict=True):
            root = self.tmp / n
            root.mkdir(parents=True, exist_ok=True)
            self.brokers.append(await start_broker(root, ip, args=(), **{
                "brokerClusterName": "DLedgerCluster", "brokerName": "dledger-a",
                "namesrvAddr": self.namesrv.addr, "storePathRootDir": str(root / "store"),
                "enableProxy": "true", "enableDLegerCommitLog": "true",
                "dLegerGroup": "dledger-a", "dLegerPeers": self.peers, "dLegerSelfId": n,
                "mappedFileSizeCommitLog": str(8 * 1024 * 1024),
                "maxMessageSize": str(1024 * 1024), **self.props}))

    async def status(self, i: int) -> dict[str, object] | None:
        if not self.alive(i):
            return None
        return await read_status(self.rpc, self.brokers[i].addr)

    async def leader(self) -> int | None:
        for i in range(len(self.brokers)):
            st = await self.status(i)
            if st is not None and st.get("role") == "LEADER":
                return i
        return None

    async def wait_leader(self, timeout: float = 30.0, *, not_index: int | None = None,
                          want: int | None = None) -> int:
        async with asyncio.timeout(timeout):
            while True:
                i = await self.leader()
                if i is not None and i != not_index and want in (None, i):
                    return i
                await asyncio.sleep(0.05)

    async def wait_master(self, timeout: float = 30.0, *, not_index: int | None = None) -> int:
        return await self.wait_leader(timeout, not_index=not_index)

    async def wait_ready(self) -> None:
        await self.wait_caught_up()

    async def wait_caught_up(self, timeout: float = 60.0) -> None:
        """Every replica has applied the leader's whole log."""
        async with asyncio.timeout(timeout):
            while True:
                sts = [await self.status(i) for i in range(len(self.brokers))]
                if all(s is not None for s in sts) and len(
                        {s["appliedIndex"] for s in sts if s}) == 1:
                    return
                await asyncio.sleep(0.1)

    async def stop_brokers(self) -> None:
        for i, b in enumerate(self.brokers):
            if self.alive(i):
                await b.terminate()

    async def close(self) -> None:
        await self.kill_brokers()
        if self.namesrv is not None:
            await self.namesrv.kill()
        await self.rpc.close()
