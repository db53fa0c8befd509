"""The DLedger-to-Controller migration of RocketMQ's controller-mode guide, on real
processes, step by step as the operator carries it out: writes off, drain, stop, clear
the stores keeping the topic and subscription-group configs, start in controller mode,
writes on."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

import mqcluster_testing.ha.cluster as controller_cluster
from mqcluster.client.admin import AdminClient
from mqcluster.client.consumer import PullConsumer
from mqcluster.client.errors import ClientError
from mqcluster.client.message import Message
from mqcluster.client.producer import Producer
from mqcluster.store.clear import clear_store
from mqcluster_operator.follow.migration_driver import AdminDriver
from mqcluster_testing.broker.procs import BrokerProc
from mqcluster_testing.ha.cluster import ProcessGroup
from mqcluster_testing.ha.dledger_cluster import DLedgerProcessGroup

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TOPIC, GROUP = "MigrationTopic", "MigrationGroup"
KEEP = ["config/topics.json", "config/subscriptionGroup.json"]


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 30) -> None:
    try:
        async with asyncio.timeout(timeout):
            while not await check():
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


def store_of(broker: BrokerProc) -> Path:
    return Path(broker.props["storePathRootDir"])


async def consume_all(namesrv: str, want: int) -> list[bytes]:
    got: list[bytes] = []
    async with PullConsumer(GROUP, namesrv_addr=namesrv) as consumer:
        async with asyncio.timeout(30):
            while len(got) < want:
                got += [m.body for m in await consumer.receive(TOPIC, wait_ms=200)]
        for queue, offset in consumer.positions.items():
            await consumer.commit_offset(queue, offset)
    return got


async def test_a_dledger_group_moves_to_controller_mode_keeping_topics_and_groups(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dl = DLedgerProcessGroup(tmp_path / "dledger")
    monkeypatch.setattr(controller_cluster, "GROUP", "dledger-a")  # same brokerName after
    ctl = ProcessGroup(tmp_path / "controller", brokerClusterName="DLedgerCluster")
    driver = AdminDriver()
    try:
        await dl.start()
        leader = dl.brokers[await dl.wait_leader()].addr
        assert dl.namesrv is not None
        async with AdminClient(broker_addr=leader) as admin:
            await admin.create_topic(TOPIC, 4, broker_addr=leader)
            await admin.create_subscription_group(GROUP, broker_addr=leader)
        async with Producer(namesrv_addr=dl.namesrv.addr, retries=0) as producer:
            for i in range(20):
                await producer.send(Message(TOPIC, f"before-{i}".encode()))
            assert len(await consume_all(dl.namesrv.addr, 5)) >= 5

            # 1-2. writes off on every replica: the group refuses sends, the lag is known
            await driver.set_writes([b.addr for b in dl.brokers], on=False)
            with pytest.raises(ClientError):
                await producer.send(Message(TOPIC, b"refused"))
        lag = await driver.lag(leader)
        assert lag is not None and 0 < lag <= 15

        # 3. drain: the consumers read everything, the lag reaches 0
        await consume_all(dl.namesrv.addr, lag)

        async def drained() -> bool:
            return await driver.lag(leader) == 0
        await eventually(drained, "lag 0")

        async def followers_have_configs() -> bool:
            for b in dl.brokers:
                async with AdminClient(broker_addr=b.addr) as admin:
                    if TOPIC not in await admin.topic_configs(b.addr):
                        return False
            return all(GROUP in (store_of(b) / "config/subscriptionGroup.json").read_text()
                       for b in dl.brokers)
        await eventually(followers_have_configs, "every replica has the configs")

        # 4. stop, clear each store except its configs, start in controller mode
        await dl.stop_brokers()
        for i, b in enumerate(dl.brokers):
            store = store_of(b)
            removed = clear_store(store, "m1", KEEP)
            assert "dledger" in removed or "commitlog" in removed
            target = tmp_path / "controller" / f"b{i}"
            target.mkdir(parents=True)
            store.rename(target / "store")
        await ctl.start()

        # 5. verify: a master, a full SyncStateSet, the topic and group intact, writes on
        info = await ctl.wait_sync_state_set(3)
        master = ctl.brokers[await ctl.wait_master()].addr
        assert info.master_epoch >= 1
        await driver.set_writes([b.addr for b in ctl.brokers], on=True)
        assert ctl.namesrv is not None
        async with AdminClient(broker_addr=master) as admin:
            topics = await admin.topic_configs(master)
        assert topics[TOPIC].writeQueueNums == 4
        assert GROUP in (store_of(ctl.brokers[0]) / "config/subscriptionGroup.json").read_text()
        assert (store_of(ctl.brokers[0]) / "epochFileCheckpoint").exists()
        async with Producer(namesrv_addr=ctl.namesrv.addr, retries=0) as producer:
            for i in range(10):
                await producer.send(Message(TOPIC, f"after-{i}".encode()))
        got = await consume_all(ctl.namesrv.addr, 10)
        assert sorted(got) == sorted(f"after-{i}".encode() for i in range(10))
        assert await driver.lag(master) == 0
    except BaseException:
        print(dl.logs())
        print(ctl.logs())
        raise
    finally:
        await dl.close()
        await ctl.close()
