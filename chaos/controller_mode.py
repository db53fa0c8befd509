"""Controller mode: 3 ``mqcontroller``, and a group of 3 ``mqbroker`` with
``allAckInSyncStateSet=true`` and SYNC_FLUSH (so a slow disk is on the path of every
acknowledgement); ``AsyncFlushControllerCluster`` is the same group with ASYNC_FLUSH."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from chaos.cluster import ChaosCluster
from chaos.netns import Network
from chaos.process import HostProcess
from mqcluster.client.controller import ControllerClient, ReplicaInfo
from mqcluster_audit import stores

CONTROLLER_PORT = 9878


class ControllerCluster(ChaosCluster):
    mode = "controller"
    group = "chaos-c"

    flush_disk_type = "SYNC_FLUSH"

    def __init__(self, net: Network, workdir: Path, lazy: bool = False) -> None:
        super().__init__(net, workdir, lazy)
        self.client_api: ControllerClient | None = None

    @property
    def controller_addr(self) -> str:
        return ";".join(f"{c.host.address}:{CONTROLLER_PORT}" for c in self.controllers)

    async def start_members(self) -> None:
        hosts = [self.net.add_host(f"c{i}") for i in range(3)]
        peers = ";".join(f"n{i}-{h.address}:{CONTROLLER_PORT}" for i, h in enumerate(hosts))
        for i, h in enumerate(hosts):
            opts = {"controllerDLegerGroup": "chaos", "controllerDLegerPeers": peers,
                    "controllerDLegerSelfId": f"n{i}",
                    "controllerStorePath": str(self.dir / f"c{i}" / "store"),
                    "scanNotActiveBrokerInterval": "200",
                    "brokerHeartbeatTimeoutMills": "1500"}
            args = ["-m", "mqcluster.controller.main"]
            for k, v in opts.items():
                args += ["-o", f"{k}={v}"]
            self.controllers.append(HostProcess.python(
                f"c{i}", h, args, self.dir / f"c{i}.log", "started on", self.seam_env(f"c{i}")))
        await asyncio.gather(*(c.start() for c in self.controllers))
        self.client_api = ControllerClient(self.controller_addr, timeout=1.0, retry_timeout=3)
        for i in range(3):
            self.add_broker(
                i, self.net.add_host(f"b{i}"), enableControllerMode="true",
                controllerAddr=self.controller_addr,
                allAckInSyncStateSet="true", flushDiskType=self.flush_disk_type,
                syncBrokerMetadataPeriod="500", brokerHeartbeatInterval="300",
                controllerHeartBeatTimeoutMills="1500", haSendHeartbeatInterval="300",
                haMaxTimeSlaveNotCatchup="4000", slaveTimeout="3000")
        await asyncio.gather(*(b.start() for b in self.brokers))

    async def replica_info(self) -> ReplicaInfo:
        assert self.client_api is not None
        return await self.client_api.get_replica_info(self.group)

    async def master(self) -> int | None:
        addr = (await self.replica_info()).master_address
        return next((i for i in range(len(self.brokers)) if self.broker_addr(i) == addr), None)

    async def healthy(self) -> bool:
        try:
            info = await self.replica_info()
        except Exception:
            return False
        m = await self.master()
        return (m is not None and len(info.sync_state_set) == len(self.brokers)
                and all(b.alive and not b.stopped for b in self.brokers))

    async def active_controller(self) -> int | None:
        assert self.client_api is not None
        for i, c in enumerate(self.controllers):
            if not c.alive:
                continue
            with contextlib.suppress(Exception):
                meta = await asyncio.wait_for(
                    self.client_api.get_metadata(f"{c.host.address}:{CONTROLLER_PORT}"), 1.0)
                if meta.is_leader:
                    return i
        return None

    async def stop_brokers(self) -> int:
        m = await self.wait_master(30)
        for i in sorted(range(len(self.brokers)), key=lambda i: i == m):  # master last
            await self.brokers[i].terminate()
        return m

    def replicas_identical(self) -> tuple[bool, str]:
        logs = self.commitlogs()
        confirms = [stores.confirm_offset(self.store_dir(i)) for i in range(len(self.brokers))]
        unread = [f"b{i}" for i, c in enumerate(confirms) if c is None]
        if unread:  # nothing to hold the commitlogs to: the check cannot pass
            return False, (f"confirmOffset of {', '.join(unread)} cannot be read from the "
                           f"checkpoint (missing, or never set)")
        confirm = max(c for c in confirms if c is not None)
        shortest = min(len(c) for c in logs)
        if shortest < confirm:
            return False, f"a replica ends at {shortest}, below confirmOffset {confirm}"
        same = all(c[:shortest] == logs[0][:shortest] for c in logs)
        return same, f"identical up to {shortest} (confirmOffset {confirm})" if same else \
            f"commitlogs differ below {shortest} (confirmOffset {confirm})"

    async def close(self) -> None:
        await super().close()
        if self.client_api is not None:
            await self.client_api.close()


class AsyncFlushControllerCluster(ControllerCluster):
    """The same group with ASYNC_FLUSH: a broker acknowledges what its replicas hold in
    memory and fsyncs it later (``flushIntervalCommitLog``), so a power loss of every
    replica at once loses what none had fsynced yet; the runner measures how much."""

    flush_disk_type = "ASYNC_FLUSH"
    promises_no_loss = False
    group = "chaos-ca"

