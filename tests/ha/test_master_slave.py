"""Classic master-slave mode: the HA stream under a fixed epoch, no controller."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from mqcluster.broker.config import BrokerConfig, check_broker_config
from mqcluster.broker.http_server import refresh_gauges
from mqcluster.broker.server import BrokerServer
from mqcluster.client import AdminClient
from mqcluster.namesrv.config import NamesrvConfig
from mqcluster.namesrv.server import NamesrvServer
from mqcluster.store.message import MessageRecord, PutStatus
from mqcluster_testing.ha.group import TOPIC, wait_until
from mqcluster_testing.procs import free_addr

Start = Callable[..., Awaitable[tuple[BrokerServer, BrokerServer]]]


def config(root: Path, namesrv: str, ip: str, **props: object) -> BrokerConfig:
    def port() -> int:
        return int(free_addr(ip).rsplit(":", 1)[1])

    values: dict[str, object] = {
        "brokerClusterName": "Classic", "brokerName": "classic-a", "brokerIP1": ip,
        "bindAddress": ip, "listenPort": port(), "haListenPort": port(),
        "enableProxy": False, "metricsExporterType": "DISABLE",
        "storePathRootDir": str(root), "mappedFileSizeCommitLog": 1024 * 1024,
        "maxMessageSize": 64 * 1024, "namesrvAddr": namesrv,
        "registerNameServerPeriod": 200, "haSendHeartbeatInterval": 200,
        "slaveTimeout": 800,
    }
    values.update(props)
    return check_broker_config(BrokerConfig.model_validate(values))


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[Start]:
    ns = NamesrvServer(NamesrvConfig(bindAddress="127.0.0.40", listenPort=0))
    await ns.start()
    started: list[BrokerServer] = []

    async def start(role: str) -> tuple[BrokerServer, BrokerServer]:
        master = BrokerServer(config(tmp_path / "m", ns.address, "127.0.0.41",
                                     brokerId=0, brokerRole=role))
        slave = BrokerServer(config(tmp_path / "s", ns.address, "127.0.0.42",
                                    brokerId=1, brokerRole="SLAVE"))
        for b in (master, slave):
            await b.start()
            started.append(b)
        return master, slave

    try:
        yield start
    finally:
        for b in started:
            await b.stop()
        await ns.stop()


def in_sync(master: BrokerServer) -> bool:
    assert master.classic is not None
    view = master.classic.master.view
    return view is not None and 1 in view.members


async def put(b: BrokerServer, body: bytes) -> PutStatus:
    return (await b.context.store.put_message(MessageRecord(TOPIC, 0, body))).status


async def test_sync_master_acks_once_the_slave_has_it(pair: Start) -> None:
    master, slave = await pair("SYNC_MASTER")
    await wait_until(lambda: in_sync(master))
    for i in range(10):
        assert await put(master, f"m{i}".encode()) is PutStatus.PUT_OK
        assert slave.context.store.commitlog_max_offset == \
            master.context.store.commitlog_max_offset, "acknowledged only once copied"
    assert await put(slave, b"to a slave") is PutStatus.SERVICE_NOT_AVAILABLE
    assert slave.classic is not None and slave.classic.slave is not None
    await slave.classic.slave.stop()
    assert await put(master, b"nobody copies it") is PutStatus.FLUSH_SLAVE_TIMEOUT


async def test_async_master_acks_at_once_and_reports_the_lag(pair: Start) -> None:
    master, slave = await pair("ASYNC_MASTER")
    await wait_until(lambda: in_sync(master))
    assert slave.classic is not None and slave.classic.slave is not None
    await slave.classic.slave.stop()
    assert await put(master, b"x" * 1000) is PutStatus.PUT_OK
    await wait_until(lambda: master.context.ha_lag().get(1, 0) > 0)
    refresh_gauges(master.context)
    lag = master.context.metrics.registry.get_sample_value(
        "rocketmq_ha_slave_lag_bytes", {**master.context.metrics.labels, "slave": "1"})
    assert lag is not None and lag > 1000


async def test_consumers_read_from_the_slave_while_the_master_is_gone(pair: Start) -> None:
    master, slave = await pair("SYNC_MASTER")
    await wait_until(lambda: in_sync(master))
    for i in range(5):
        assert await put(master, f"m{i}".encode()) is PutStatus.PUT_OK
    await master.stop()
    store = slave.context.store
    await wait_until(lambda: store.max_offset(TOPIC, 0) == 5)
    got = store.get_messages(TOPIC, 0, 0, 32)
    assert [m.body for m in got.messages] == [f"m{i}".encode() for i in range(5)]


async def test_sync_master_keeps_every_ack_when_its_disk_is_kept(tmp_path: Path,
                                                                 pair: Start) -> None:
    master, slave = await pair("SYNC_MASTER")
    await wait_until(lambda: in_sync(master))
    for i in range(20):
        assert await put(master, f"m{i}".encode()) is PutStatus.PUT_OK
    cfg = master.config
    end = master.context.store.commitlog_max_offset
    await master.stop()
    again = BrokerServer(cfg)
    await again.start()
    try:
        assert again.context.store.commitlog_max_offset == end
        await wait_until(lambda: in_sync(again))
        assert await put(again, b"after restart") is PutStatus.PUT_OK
        assert slave.context.store.commitlog_max_offset == \
            again.context.store.commitlog_max_offset
        assert again.classic is not None
        assert [(e.epoch, e.start_offset) for e in again.classic.epochs.entries] == [(1, 0)]
    finally:
        await again.stop()


async def test_a_slave_copies_the_masters_topics(pair: Start) -> None:
    master, slave = await pair("ASYNC_MASTER")
    async with AdminClient(broker_addr=master.context.config.broker_addr) as admin:
        await admin.create_topic("CopiedTopic", queue_nums=2)
    await wait_until(lambda: slave.context.store.topics.get("CopiedTopic") is not None, 15)
