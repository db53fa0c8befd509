"""An in-process controller-mode group: one controller and N brokers on 127.0.0.x.

Real sockets and the real HA stream; the controller runs single-node consensus.
``GroupHarness.kill(i)`` stops a broker abruptly (its connections close, as after
SIGKILL; the store is closed as it is, so what it wrote stays).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from functools import partial
from pathlib import Path

from mqcluster.broker.config import BrokerConfig, check_broker_config
from mqcluster.broker.server import BrokerServer
from mqcluster.controller.config import ControllerConfig
from mqcluster.controller.consensus import LocalConsensus
from mqcluster.controller.service import ControllerService
from mqcluster.store import MessageStore
from mqcluster.store.message import MessageRecord, PutResult
from mqcluster.store.subscription_group import SubscriptionGroupConfig
from mqcluster.store.topic_config import TopicConfig
from mqcluster_testing.procs import free_addr

TOPIC = "TopicHA"


async def wait_until(cond: Callable[[], object], timeout: float = 20.0) -> None:
    """Poll ``cond`` until it holds (state spread over sockets has no single event)."""
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.02)


def broker_config(root: Path, controller: str, ip: str, **extra: object) -> BrokerConfig:
    def port() -> int:
        return int(free_addr(ip).rsplit(":", 1)[1])

    props: dict[str, object] = {
        "brokerClusterName": "HACluster",
        "brokerName": "group-a",
        "brokerIP1": ip,
        "bindAddress": ip,
        "listenPort": port(),
        "haListenPort": port(),
        "enableProxy": False,
        "metricsExporterType": "DISABLE",
        "storePathRootDir": str(root),
        "mappedFileSizeCommitLog": 1024 * 1024,
        "maxMessageSize": 64 * 1024,
        "enableControllerMode": True,
        "controllerAddr": controller,
        "syncBrokerMetadataPeriod": 300,
        "brokerHeartbeatInterval": 200,
        "controllerHeartBeatTimeoutMills": 1500,
        "haSendHeartbeatInterval": 200,
        "haMaxTimeSlaveNotCatchup": 3000,
        "allAckInSyncStateSet": True,
        "slaveTimeout": 3000,
        "slaveSyncInterval": 200,
    }
    props.update(extra)
    return check_broker_config(BrokerConfig.model_validate(props))


def _has_synced_offset(store: MessageStore) -> bool:
    return store.offsets.query("SyncedGroup", "SyncedTopic", 2) == 17


class GroupHarness:
    def __init__(self, tmp: Path, size: int, **broker_extra: object) -> None:
        self.tmp = tmp
        self.size = size
        self.broker_extra = broker_extra
        self.controller: ControllerService | None = None
        self.configs: list[BrokerConfig] = []
        self.brokers: list[BrokerServer | None] = []

    async def start(self) -> None:
        addr = free_addr()
        cfg = ControllerConfig.model_validate({
            "controllerDLegerPeers": f"n0-{addr}",
            "controllerDLegerSelfId": "n0",
            "controllerStorePath": str(self.tmp / "controller"),
            "scanNotActiveBrokerInterval": 200,
        })
        self.controller = ControllerService(
            cfg, consensus_factory=lambda sm, _reg: LocalConsensus("n0", sm))
        await self.controller.start()
        for i in range(self.size):
            ip = f"127.0.0.{20 + i}"
            self.configs.append(broker_config(self.tmp / f"b{i}", addr, ip, **self.broker_extra))
            self.brokers.append(None)
        for i in range(self.size):
            await self.start_broker(i)

    async def start_broker(self, i: int, **changes: object) -> BrokerServer:
        if changes:
            self.configs[i] = self.configs[i].model_copy(update=changes)
        server = BrokerServer(self.configs[i])
        await server.start()
        self.brokers[i] = server
        return server

    def broker(self, i: int) -> BrokerServer:
        b = self.brokers[i]
        assert b is not None, f"broker {i} is down"
        return b

    async def kill(self, i: int) -> None:
        """Stop broker ``i`` the way a crash looks from outside: connections drop."""
        b = self.brokers[i]
        self.brokers[i] = None
        if b is None:
            return
        if b.replicas is not None:
            await b.replicas.stop()
            b.replicas = None
        if b.registrar is not None:
            b.registrar = None
        await b.stop()

    def master_index(self) -> int | None:
        for i, b in enumerate(self.brokers):
            if b is not None and b.replicas is not None and b.replicas.is_master:
                return i
        return None

    async def wait_for(self, cond: Callable[[], object], timeout: float = 20.0) -> None:
        await wait_until(cond, timeout)

    async def wait_master(self, timeout: float = 20.0) -> int:
        await self.wait_for(lambda: self.master_index() is not None, timeout)
        i = self.master_index()
        assert i is not None
        return i

    async def put(self, i: int, body: bytes, queue: int = 0) -> PutResult:
        store = self.broker(i).context.store
        return await store.put_message(MessageRecord(TOPIC, queue, body))

    async def copy_master_metadata(self) -> int:
        """Puts topic SyncedTopic, group SyncedGroup and its offset 17 on queue 2 on the
        master, and waits until every broker has the offset and the topic; the master's
        index."""
        m = await self.wait_master()
        master = self.broker(m).context.store
        master.topics.put(TopicConfig("SyncedTopic", 4, 4))
        master.subscriptions.put(SubscriptionGroupConfig("SyncedGroup"))
        master.offsets.commit("SyncedGroup", "SyncedTopic", 2, 17)
        for i in range(len(self.brokers)):
            store = self.broker(i).context.store
            await self.wait_for(partial(_has_synced_offset, store))
            assert store.topics.get("SyncedTopic") is not None
        return m

    async def stop(self) -> None:
        for i in range(len(self.brokers)):
            with contextlib.suppress(Exception):
                await self.kill(i)
        if self.controller is not None:
            await self.controller.stop()
