"""A controller-mode group as real processes: 3 ``mqcontroller``, ``mqnamesrv``, N ``mqbroker``.

Every process binds its own 127.0.0.x address with ports chosen at run time; ``close()``
kills whatever is still running. Brokers are SIGKILLed (``kill``), SIGSTOPped
(``hang``/``wake``) and restarted on the same store (``restart``).
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any, Literal

from mqcluster.client.controller import ControllerClient, ReplicaInfo
from mqcluster_testing.broker.procs import BrokerProc, NamesrvProc, start_broker
from mqcluster_testing.control_plane import start_control_plane, stop_control_plane
from mqcluster_testing.controller.localcluster import LocalControllerCluster
from mqcluster_testing.ha.brokers import BrokerProcesses
from mqcluster_testing.procs import free_addr

GROUP = "group-a"
CLUSTER = "HACluster"
Detection = Literal["fast", "shipped"]
FAST_BROKER_DETECTION = {"brokerHeartbeatInterval": "300",
                         "controllerHeartBeatTimeoutMills": "1500"}
FAST_CONTROLLER_DETECTION = {"scanNotActiveBrokerInterval": "200",
                             "brokerHeartbeatTimeoutMills": "1500"}
"""Tuned failure detection, shorter than what ships, so the suite's failovers take
less time. Benches and the shipped-defaults tests use ``detection="shipped"``."""


class ProcessGroup(BrokerProcesses):
    def __init__(self, tmp: Path, size: int = 3, *, detection: Detection = "fast",
                 **broker_props: str) -> None:
        self.tmp = tmp
        self.size = size
        self.detection = detection
        fast = detection == "fast"
        self.broker_props = {**(FAST_BROKER_DETECTION if fast else {}), **broker_props}
        addrs = [free_addr() for _ in range(3)]
        self.controllers = LocalControllerCluster(
            addrs, tmp / "controllers",
            # /health lists each controller's recent elections and what triggered them
            metrics_ports=[int(free_addr(a.rpartition(":")[0]).rpartition(":")[2])
                           for a in addrs],
            options=FAST_CONTROLLER_DETECTION if fast else {})
        self.namesrv: NamesrvProc | None = None
        self.brokers: list[BrokerProc] = []
        self.client: ControllerClient | None = None

    async def start(self) -> None:
        self.namesrv, self.client = await start_control_plane(self.tmp, self.controllers)
        for i in range(self.size):
            ip = free_addr().rsplit(":", 1)[0]
            root = self.tmp / f"b{i}"
            root.mkdir(parents=True, exist_ok=True)
            props = {
                "brokerClusterName": CLUSTER,
                "brokerName": GROUP,
                "namesrvAddr": self.namesrv.addr,
                "storePathRootDir": str(root / "store"),
                "enableControllerMode": "true",
                "controllerAddr": self.controllers.controller_addr,
                "enableProxy": "true",
                "allAckInSyncStateSet": "true",
                "syncBrokerMetadataPeriod": "500",
                "haSendHeartbeatInterval": "300",
                "haMaxTimeSlaveNotCatchup": "4000",
                "slaveTimeout": "3000",
                "slaveSyncInterval": "500",
                "mappedFileSizeCommitLog": str(8 * 1024 * 1024),
                "maxMessageSize": str(1024 * 1024),
                "flushDiskType": "ASYNC_FLUSH",
                **self.broker_props,
            }
            props.pop("brokerId", None)
            self.brokers.append(await start_broker(root, ip, args=(), **props))

    async def replica_info(self) -> ReplicaInfo:
        assert self.client is not None
        return await self.client.get_replica_info(GROUP)

    async def elections(self) -> list[dict[str, Any]]:
        """The recent elections every running controller recorded (``/health``): trigger,
        old and new master, detection and consensus times."""
        out: list[dict[str, Any]] = []
        for node in self.controllers.procs:
            with contextlib.suppress(OSError, ValueError):
                health = await asyncio.to_thread(self.controllers.health, node)
                out.extend(health.get("recentElections", []))
        return out

    def index_of(self, addr: str | None) -> int | None:
        return next((i for i, b in enumerate(self.brokers) if b.addr == addr), None)

    async def wait_master(self, timeout: float = 30.0, *, not_index: int | None = None) -> int:
        async with asyncio.timeout(timeout):
            while True:
                with contextlib.suppress(Exception):
                    info = await self.replica_info()
                    i = self.index_of(info.master_address)
                    if i is not None and i != not_index and self.alive(i):
                        return i
                await asyncio.sleep(0.05)

    async def wait_sync_state_set(self, size: int, timeout: float = 60.0) -> ReplicaInfo:
        async with asyncio.timeout(timeout):
            while True:
                with contextlib.suppress(Exception):
                    info = await self.replica_info()
                    if len(info.sync_state_set) >= size:
                        return info
                await asyncio.sleep(0.1)

    async def wait_ready(self) -> None:
        """Every replica back in the SyncStateSet."""
        await self.wait_sync_state_set(self.size)

    async def stop_brokers(self) -> None:
        """SIGTERM every broker (clean shutdown, stores closed) for offline checks; the
        master last, so no election happens on the way."""
        master = None
        with contextlib.suppress(Exception):
            master = self.index_of((await self.replica_info()).master_address)
        for i in sorted(range(len(self.brokers)), key=lambda i: i == master):
            if self.alive(i):
                self.wake(i)
                await self.brokers[i].terminate()

    async def close(self) -> None:
        await self.kill_brokers()
        await stop_control_plane(self.namesrv, self.controllers, self.client)
