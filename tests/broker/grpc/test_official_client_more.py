"""Official client: FIFO push consumption and state that survives a broker restart."""

from __future__ import annotations

import time
from pathlib import Path

from rocketmq import FilterExpression, Message, PushConsumer

from mqcluster.store.subscription_group import SubscriptionGroupConfig
from tests.broker.grpc.client_util import (
    Collector,
    client_config,
    new_message,
    producer,
    receive_until,
    simple_consumer,
)
from tests.broker.grpc.conftest import broker_config
from tests.broker.grpc.harness import BrokerThread
from tests.broker.grpc.test_official_client import make_group, make_topic


def test_fifo_push_consumer_keeps_group_order(broker: BrokerThread) -> None:
    make_topic(broker, "FifoPush", queues=2, message_type="FIFO")
    make_group(broker, SubscriptionGroupConfig("FifoPushGroup", consumeMessageOrderly=True))
    collector = Collector()
    consumer = PushConsumer(client_config(broker.address), "FifoPushGroup", collector,
                            {"FifoPush": FilterExpression()})
    consumer.startup()
    try:
        assert consumer.fifo
        with producer(broker.address, ("FifoPush",)) as p:
            for i in range(8):
                for g in ("G1", "G2", "G3"):
                    p.send(new_message("FifoPush", f"{g}-{i}".encode(), group=g))
        assert collector.wait_for(lambda ms: len(ms) >= 24, 30)
        for g in ("G1", "G2", "G3"):
            seen = [m.body for m in collector.messages if m.message_group == g]
            assert seen == [f"{g}-{i}".encode() for i in range(8)]
    finally:
        consumer.shutdown()


def test_progress_and_delayed_messages_survive_restart(tmp_path: Path) -> None:
    root = tmp_path / "store"
    first = BrokerThread(root, broker_config()).start()
    try:
        make_topic(first, "Durable")
        with producer(first.address, ("Durable",)) as p:
            for i in range(4):
                p.send(new_message("Durable", f"d{i}".encode()))
            p.send(new_message("Durable", b"delayed", deliver_at_s=int(time.time()) + 3))
        with simple_consumer(first.address, "DurableGroup", "Durable") as c:
            got: list[Message] = []
            while len(got) < 2:
                batch = c.receive(2 - len(got), 10)
                for m in batch:
                    c.ack(m)
                got += batch
            assert [m.body for m in got] == [b"d0", b"d1"]
    finally:
        first.stop()
    second = BrokerThread(root, broker_config()).start()
    try:
        with simple_consumer(second.address, "DurableGroup", "Durable", await_s=5) as c:
            rest = receive_until(c, 3, deadline_s=20)
            assert [m.body for m in rest] == [b"d2", b"d3", b"delayed"]
    finally:
        second.stop()


def test_dead_letter_queue_after_max_attempts(broker: BrokerThread) -> None:
    make_topic(broker, "PoisonTopic")
    make_group(broker, SubscriptionGroupConfig("PoisonGroup", retryMaxTimes=1))
    with producer(broker.address, ("PoisonTopic",)) as p:
        sent = p.send(new_message("PoisonTopic", b"poison", props={"why": "test"}))
    with simple_consumer(broker.address, "PoisonGroup", "PoisonTopic", await_s=3) as c:
        attempts = [m.delivery_attempt for m in receive_until(c, 1, invisible_s=1, ack=False)]
        attempts += [m.delivery_attempt for m in receive_until(c, 1, invisible_s=1, ack=False)]
        assert attempts == [1, 2]
        c.await_duration = 2
        assert c.receive(32, 10) == []
    with simple_consumer(broker.address, "DlqReader", "%DLQ%PoisonGroup", await_s=3) as d:
        [dead] = receive_until(d, 1)
        assert (dead.message_id, dead.body, dead.properties) == (sent.message_id, b"poison",
                                                                 {"why": "test"})
