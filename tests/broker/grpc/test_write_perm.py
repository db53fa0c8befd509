"""Routes handed out over gRPC follow the name servers' write permission
(``mqadmin wipeWritePerm`` / ``addWritePerm``), as remoting clients' routes do."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mqcluster.admin.ops import write_perm
from mqcluster.broker.grpc.routes import LocalRouteProvider, Permission
from mqcluster.broker.grpc.write_perm import NamesrvWritePerm
from mqcluster.broker.messaging.catalog import Catalog
from mqcluster.broker.messaging.config import MessagingConfig
from mqcluster.client.namesrv import NamesrvClient
from mqcluster.namesrv.config import NamesrvConfig
from mqcluster.namesrv.server import NamesrvServer
from mqcluster.protocol.namesrv import (
    BrokerRegistration,
    QueueData,
    TopicConfig,
    TopicRouteData,
)
from mqcluster.store.topic_config import TopicConfig as StoredTopic
from tests.broker.messaging.memory_log import MemoryLog

ACCESS = (("127.0.0.1", 8081),)


def _provider(tmp_path: Path, wiped: NamesrvWritePerm | None) -> LocalRouteProvider:
    log = MemoryLog(str(tmp_path))
    log.topics.put(StoredTopic("T", 2, 2))
    catalog = Catalog(log, MessagingConfig(brokerName="broker-a"))  # type: ignore[arg-type]
    return LocalRouteProvider(catalog, "broker-a", write_wiped=wiped.wiped if wiped else None)


@pytest.fixture
async def namesrv() -> AsyncIterator[NamesrvServer]:
    srv = NamesrvServer(NamesrvConfig(listenPort=0, bindAddress="127.0.0.1"))
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


async def test_routes_say_read_after_wipe_write_perm_and_read_write_after_add(
        namesrv: NamesrvServer, tmp_path: Path) -> None:
    async with NamesrvClient(namesrv.address, timeout=2.0) as client:
        await client.register_broker(BrokerRegistration(
            clusterName="DefaultCluster", brokerName="broker-a", brokerAddr="127.0.0.9:10911",
            brokerId=0, haServerAddr="127.0.0.9:10912",
            topicConfigTable={"T": TopicConfig(topicName="T", readQueueNums=2,
                                                 writeQueueNums=2)}))
        now = [0.0]
        perm = NamesrvWritePerm(client, "broker-a", ttl_s=3.0, wait_s=2.0,
                                clock=lambda: now[0])
        provider = _provider(tmp_path, perm)

        async def permissions() -> set[Permission]:
            routes = await provider.route("T", ACCESS)
            return {r.permission for r in routes}

        assert await permissions() == {Permission.READ_WRITE}
        report = await write_perm(namesrv.address, "broker-a", add=False)
        assert not report.errors
        assert await permissions() == {Permission.READ_WRITE}  # (known for ttl_s)
        now[0] += 3.0
        assert await permissions() == {Permission.READ}
        assignment = await provider.assignment("T", "G", ACCESS)
        assert [a.permission for a in assignment] == [Permission.READ]
        await write_perm(namesrv.address, "broker-a", add=True)
        now[0] += 3.0
        assert await permissions() == {Permission.READ_WRITE}


class _Source:
    def __init__(self) -> None:
        self.perm = 6
        self.calls = 0
        self.gate: asyncio.Event | None = None
        self.fail = False

    async def get_route(self, topic: str) -> object:
        self.calls += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise OSError("name server unreachable")
        return TopicRouteData(queueDatas=[
            QueueData(brokerName="other", readQueueNums=1, writeQueueNums=1, perm=6),
            QueueData(brokerName="broker-a", readQueueNums=2, writeQueueNums=2,
                      perm=self.perm)])


async def test_a_slow_or_unreachable_name_server_leaves_the_last_answer() -> None:
    source = _Source()
    now = [0.0]
    perm = NamesrvWritePerm(source, "broker-a", ttl_s=1.0, wait_s=0.01, clock=lambda: now[0])
    source.perm = 4
    assert await perm.wiped("T") is True
    assert await perm.wiped("T") is True and source.calls == 1  # (cached)
    now[0] += 1.0
    source.gate = asyncio.Event()
    assert await perm.wiped("T") is True  # (slow: the last answer holds)
    source.perm = 6
    source.gate.set()
    await asyncio.gather(*perm._pending.values())  # (the lookup left running)
    assert await perm.wiped("T") is False  # (the background lookup finished)
    source.gate = None
    source.fail = True
    now[0] += 1.0
    assert await perm.wiped("T") is False
    assert await perm.wiped("Unknown") is False


async def test_without_a_name_server_routes_follow_the_broker_permission_only(
        tmp_path: Path) -> None:
    provider = _provider(tmp_path, None)
    routes = await provider.route("T", ACCESS)
    assert {r.permission for r in routes} == {Permission.READ_WRITE}
