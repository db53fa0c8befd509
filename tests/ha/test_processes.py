"""Controller mode as real processes: SIGKILL and SIGSTOP of the master under load.

The official RocketMQ 5 Python client, unmodified, is configured with the endpoints of
all three replicas and sends with ``allAckInSyncStateSet=true`` while the master is
killed (or hung) again and again. Afterwards every acknowledged message must be in
every replica, the commitlogs byte-identical, the epoch files equal, and no consumer
may have seen a message that is not in the final stores.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from rocketmq import FilterExpression, Producer, SimpleConsumer

from mqcluster.client import AdminClient
from mqcluster.client import Message as NativeMessage
from mqcluster.client import Producer as NativeProducer
from mqcluster.protocol.properties import PROPERTY_UNIQ_KEY
from mqcluster.store.epoch_file import EpochFileCache
from mqcluster_testing.ha.brokers import running
from mqcluster_testing.ha.cluster import ProcessGroup
from tests.broker.grpc.client_util import client_config, new_message

TOPIC = "FailoverTopic"
pytestmark = pytest.mark.slow


@dataclass
class History:
    """What the producer was told: acked keys, failed keys, and when each ack came."""

    acked: dict[str, str] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    ack_times: list[float] = field(default_factory=list)
    received: set[str] = field(default_factory=set)
    stop: threading.Event = field(default_factory=threading.Event)

    def longest_gap(self) -> float:
        times = sorted(self.ack_times)
        return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


def produce(endpoints: str, history: History) -> None:
    p = Producer(client_config(endpoints), (TOPIC,))
    p.startup()
    try:
        n = 0
        while not history.stop.is_set():
            key = f"k{n}"
            n += 1
            try:
                receipt = p.send(new_message(TOPIC, key.encode(), keys=(key,)))
            except Exception:
                history.failed.append(key)
                continue
            history.acked[key] = receipt.message_id
            history.ack_times.append(time.monotonic())
    finally:
        p.shutdown()


def consume(endpoints: str, history: History) -> None:
    c = SimpleConsumer(client_config(endpoints), "FailoverGroup",
                       {TOPIC: FilterExpression("*")}, await_duration=1)
    c.startup()
    try:
        while not history.stop.is_set():
            try:
                for m in c.receive(32, 15):
                    history.received.add(m.body.decode())
                    c.ack(m)
            except Exception:
                time.sleep(0.05)
    finally:
        c.shutdown()


@pytest.fixture
async def group(tmp_path: Path) -> AsyncIterator[ProcessGroup]:
    g = ProcessGroup(tmp_path)
    async with running(g, lambda: g.wait_sync_state_set(3)):
        yield g


async def check_consistency(g: ProcessGroup, history: History) -> None:
    await g.wait_sync_state_set(3)
    info = await g.replica_info()
    m = g.index_of(info.master_address)
    assert m is not None
    await g.stop_brokers()
    logs = [g.commitlog(i) for i in range(3)]
    shortest = min(len(c.rstrip(b"\0")) for c in logs)
    assert shortest > 0
    assert logs[0][:shortest] == logs[1][:shortest] == logs[2][:shortest]
    stored = [g.messages(i) for i in range(3)]
    keys = [[msg.body.decode() for msg in s if msg.topic == TOPIC] for s in stored]
    assert keys[0] == keys[1] == keys[2], "replicas hold the same messages in the same order"
    present = set(keys[0])
    lost = set(history.acked) - present
    assert not lost, f"{len(lost)} acknowledged messages lost: {sorted(lost)[:10]}"
    seen_not_stored = history.received - present
    assert not seen_not_stored, f"consumers saw truncated messages: {sorted(seen_not_stored)}"
    uniq = [msg.properties.get(PROPERTY_UNIQ_KEY) for msg in stored[0] if msg.topic == TOPIC]
    retries = len(uniq) - len(set(uniq))
    epochs = [[(e.epoch, e.start_offset) for e in
               EpochFileCache.load(str(g.store_dir(i) / "epochFileCheckpoint")).entries]
              for i in range(3)]
    assert epochs[0] == epochs[1] == epochs[2]
    print(f"acked {len(history.acked)}, failed sends {len(history.failed)}, "
          f"client retries stored twice {retries}, consumed {len(history.received)}, "
          f"longest gap between acks {history.longest_gap():.2f} s")


async def test_sigkill_master_twenty_times(group: ProcessGroup) -> None:
    g = group
    history = History()
    rng = random.Random(11)
    workers = [threading.Thread(target=produce, args=(g.endpoints, history), daemon=True),
               threading.Thread(target=consume, args=(g.endpoints, history), daemon=True)]
    workers[0].start()
    try:
        await wait_acks(history, 20)  # the topic exists: the consumer finds its route
        workers[1].start()
        for _ in range(20):
            m = await g.wait_master()
            await asyncio.sleep(rng.uniform(0.2, 1.0))
            await g.kill(m)
            await g.wait_master(not_index=m)
            before = len(history.acked)
            await g.restart(m)
            await wait_acks(history, before + 5)
        await wait_acks(history, len(history.acked) + 20)
        await wait_received(history, 100)
    finally:
        history.stop.set()
        for w in workers:
            if w.is_alive():
                await asyncio.to_thread(w.join, 30)
    await check_consistency(g, history)


async def test_pipelined_sends_acknowledged_before_a_sigkill_are_on_every_replica(
        group: ProcessGroup) -> None:
    """The native producer's sends, 64 in flight on one connection, are stored in groups
    (one write, one wait for the whole SyncStateSet); the master is killed mid-burst, and
    every send it acknowledged must be on every replica once the group is whole again."""
    g = group
    m = await g.wait_master()
    await g.wait_ready()
    addr = g.brokers[m].addr
    async with AdminClient(broker_addr=addr) as admin:
        await admin.create_topic(TOPIC, queue_nums=8)
    acked: set[bytes] = set()
    async with NativeProducer(broker_addr=addr, retries=0) as producer:
        async def worker(w: int) -> None:
            for n in itertools.count():
                body = f"p{w}-{n}".encode()
                try:
                    await producer.send(NativeMessage(TOPIC, body))
                except Exception:
                    return  # the master is gone
                acked.add(body)

        workers = [asyncio.create_task(worker(w)) for w in range(64)]
        async with asyncio.timeout(60):
            while len(acked) < 3000:
                await asyncio.sleep(0.01)
        await g.kill(m)
        async with asyncio.timeout(30):
            await asyncio.gather(*workers)
    await g.wait_master(not_index=m)
    await g.restart(m)
    await g.wait_sync_state_set(3)
    await g.stop_brokers()
    for i in range(3):
        stored = {msg.body for msg in g.messages(i) if msg.topic == TOPIC}
        lost = acked - stored
        assert not lost, f"replica {i} lacks {len(lost)} acknowledged sends: {sorted(lost)[:5]}"


async def test_hung_master_steps_down_and_truncates(group: ProcessGroup) -> None:
    g = group
    history = History()
    worker = threading.Thread(target=produce, args=(g.endpoints, history), daemon=True)
    worker.start()
    try:
        await wait_acks(history, 20)
        for _ in range(2):
            m = await g.wait_master()
            g.hang(m)
            await g.wait_master(not_index=m)
            # A client whose own connection is to the hung process waits until it wakes.
            with contextlib.suppress(TimeoutError):
                await wait_acks(history, len(history.acked) + 5, timeout=5)
            g.wake(m)
            await wait_acks(history, len(history.acked) + 5)
            await g.wait_sync_state_set(3)
        await wait_acks(history, len(history.acked) + 20)
    finally:
        history.stop.set()
        await asyncio.to_thread(worker.join, 30)
    await check_consistency(g, history)


async def wait_received(history: History, count: int, timeout: float = 60.0) -> None:
    async with asyncio.timeout(timeout):
        while len(history.received) < count:
            await asyncio.sleep(0.05)


async def wait_acks(history: History, count: int, timeout: float = 60.0) -> None:
    async with asyncio.timeout(timeout):
        while len(history.acked) < count:
            await asyncio.sleep(0.05)
