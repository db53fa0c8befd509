"""The official RocketMQ 5 Python client, unmodified, against the gRPC endpoint."""

from __future__ import annotations

import time

from rocketmq import (
    FilterExpression,
    Message,
    PushConsumer,
    TransactionChecker,
    TransactionResolution,
)

from mqcluster.store.subscription_group import SubscriptionGroupConfig
from mqcluster.store.topic_config import TopicConfig
from tests.broker.grpc.client_util import (
    Collector,
    client_config,
    new_message,
    producer,
    receive_until,
    simple_consumer,
)
from tests.broker.grpc.harness import BrokerThread


def make_topic(broker: BrokerThread, name: str, queues: int = 1,
               message_type: str | None = None) -> None:
    assert broker.store is not None
    attrs = {"message.type": message_type} if message_type else {}
    broker.run(broker.store.topics.put, TopicConfig(name, queues, queues, attributes=attrs))


def make_group(broker: BrokerThread, group: SubscriptionGroupConfig) -> None:
    assert broker.store is not None
    broker.run(broker.store.subscriptions.put, group)


def test_send_and_receive_with_keys_tags_properties(broker: BrokerThread) -> None:
    make_topic(broker, "NormalTopic", queues=2)
    with producer(broker.address, ("NormalTopic",)) as p:
        receipts = [p.send(new_message("NormalTopic", f"body-{i}".encode(), tag="TagA",
                                       keys=(f"key-{i}",), props={"idx": str(i)}))
                    for i in range(6)]
    assert len({r.message_id for r in receipts}) == 6
    with simple_consumer(broker.address, "NormalGroup", "NormalTopic") as c:
        got = receive_until(c, 6)
        assert sorted(m.body for m in got) == sorted(f"body-{i}".encode() for i in range(6))
        by_id = {m.message_id: m for m in got}
        for i, r in enumerate(receipts):
            m = by_id[r.message_id]
            assert m.body == f"body-{i}".encode()
            assert m.tag == "TagA"
            assert m.keys == {f"key-{i}"}
            assert m.properties == {"idx": str(i)}
            assert m.delivery_attempt == 1
            assert m.born_timestamp > 0 and not m.corrupted
        assert c.receive(32, 10) == []


def test_redelivery_when_not_acked(broker: BrokerThread) -> None:
    make_topic(broker, "RedeliverTopic")
    with producer(broker.address, ("RedeliverTopic",)) as p:
        sent = p.send(new_message("RedeliverTopic", b"again"))
    with simple_consumer(broker.address, "RedeliverGroup", "RedeliverTopic", await_s=5) as c:
        first = receive_until(c, 1, invisible_s=1, ack=False)
        assert [(m.message_id, m.delivery_attempt) for m in first] == [(sent.message_id, 1)]
        started = time.monotonic()
        second = receive_until(c, 1, invisible_s=10, ack=False)
        assert [(m.message_id, m.delivery_attempt) for m in second] == [(sent.message_id, 2)]
        assert second[0].topic == "RedeliverTopic" and second[0].body == b"again"
        assert time.monotonic() - started < 4
        c.ack(second[0])
        c.await_duration = 1
        assert c.receive(32, 10) == []


def test_change_invisible_duration(broker: BrokerThread) -> None:
    make_topic(broker, "InvisTopic")
    with producer(broker.address, ("InvisTopic",)) as p:
        p.send(new_message("InvisTopic", b"slow"))
    with simple_consumer(broker.address, "InvisGroup", "InvisTopic", await_s=2) as c:
        [m] = receive_until(c, 1, invisible_s=1, ack=False)
        c.change_invisible_duration(m, 30)
        started = time.monotonic()
        assert c.receive(32, 10) == []
        assert time.monotonic() - started > 1.5
        c.ack(m)


def test_tag_filter(broker: BrokerThread) -> None:
    make_topic(broker, "TagTopic")
    with producer(broker.address, ("TagTopic",)) as p:
        for tag in ("a", "b", "c", "a"):
            p.send(new_message("TagTopic", tag.encode(), tag=tag))
    with simple_consumer(broker.address, "TagGroup", "TagTopic", "a || c") as c:
        got = receive_until(c, 3)
        assert sorted(m.body for m in got) == [b"a", b"a", b"c"]
        assert c.receive(32, 10) == []


def test_fifo_order_within_message_groups(broker: BrokerThread) -> None:
    make_topic(broker, "FifoTopic", message_type="FIFO")
    make_group(broker, SubscriptionGroupConfig("FifoGroup", consumeMessageOrderly=True))
    with producer(broker.address, ("FifoTopic",)) as p:
        for i in range(5):
            for g in ("A", "B"):
                p.send(new_message("FifoTopic", f"{g}{i}".encode(), group=g))
    with simple_consumer(broker.address, "FifoGroup", "FifoTopic") as c:
        head = c.receive(1, 10)
        assert [m.body for m in head] == [b"A0"] and head[0].message_group == "A"
        blocked = c.receive(32, 10)
        assert b"A1" not in [m.body for m in blocked]
        assert [m.body for m in blocked] == [b"B0", b"B1", b"B2", b"B3", b"B4"]
        c.ack(head[0])
        for m in blocked:
            c.ack(m)
        rest = receive_until(c, 4)
        assert [m.body for m in rest] == [b"A1", b"A2", b"A3", b"A4"]


def test_delayed_message(broker: BrokerThread) -> None:
    make_topic(broker, "DelayTopic")
    due_s = int(time.time()) + 2
    with producer(broker.address, ("DelayTopic",)) as p:
        sent = p.send(new_message("DelayTopic", b"later", keys=("dk",), props={"p": "v"},
                                  tag="dt", deliver_at_s=due_s))
    with simple_consumer(broker.address, "DelayGroup", "DelayTopic", await_s=5) as c:
        got = receive_until(c, 1)
        assert time.time() >= due_s - 0.05
        assert [(m.message_id, m.body, m.keys) for m in got] == [(sent.message_id, b"later",
                                                                 {"dk"})]
        assert got[0].delivery_timestamp == due_s * 1000
        assert (got[0].properties, got[0].tag) == ({"p": "v"}, "dt")


def test_delivery_timestamp_in_milliseconds_as_the_client_documents(broker: BrokerThread) -> None:
    """The client's docstring (and its own tests) set milliseconds: current_mills() + n."""
    make_topic(broker, "DelayMsTopic")
    due_ms = int(time.time() * 1000) + 2000
    with producer(broker.address, ("DelayMsTopic",)) as p:
        msg = new_message("DelayMsTopic", b"later in ms")
        msg.delivery_timestamp = due_ms
        p.send(msg)
    with simple_consumer(broker.address, "DelayMsGroup", "DelayMsTopic", await_s=5) as c:
        got = receive_until(c, 1)
        assert time.time() * 1000 >= due_ms - 50, "not delivered before it is due"
        assert got[0].body == b"later in ms"
        assert got[0].delivery_timestamp == due_ms


class Checker(TransactionChecker):  # type: ignore[misc]
    def __init__(self) -> None:
        self.checked: list[str] = []

    def check(self, message: Message) -> TransactionResolution:
        self.checked.append(message.message_id)
        return TransactionResolution.COMMIT


def test_transactions_commit_rollback_and_check_back(broker: BrokerThread) -> None:
    make_topic(broker, "TxTopic")
    checker = Checker()
    with producer(broker.address, ("TxTopic",), checker) as p:
        t1 = p.begin_transaction()
        p.send(new_message("TxTopic", b"committed"), t1)
        t1.commit()
        t2 = p.begin_transaction()
        p.send(new_message("TxTopic", b"rolled-back"), t2)
        t2.rollback()
        t3 = p.begin_transaction()
        orphan = p.send(new_message("TxTopic", b"orphan"), t3)
        with simple_consumer(broker.address, "TxGroup", "TxTopic", await_s=3) as c:
            got = receive_until(c, 2, deadline_s=15)
            assert sorted(m.body for m in got) == [b"committed", b"orphan"]
            assert c.receive(32, 10) == []
    assert checker.checked == [orphan.message_id]


def test_push_consumer_with_redelivery(broker: BrokerThread) -> None:
    make_topic(broker, "PushTopic", queues=2)
    failed_once: set[str] = set()

    def fail_first(m: Message) -> bool:
        if m.body == b"flaky" and m.message_id not in failed_once:
            failed_once.add(m.message_id)
            return True
        return False

    collector = Collector(fail_first)
    consumer = PushConsumer(client_config(broker.address), "PushGroup", collector,
                            {"PushTopic": FilterExpression()})
    consumer.startup()
    try:
        with producer(broker.address, ("PushTopic",)) as p:
            for i in range(4):
                p.send(new_message("PushTopic", f"push-{i}".encode(), props={"n": str(i)}))
            p.send(new_message("PushTopic", b"flaky"))

        def done(ms: list[Message]) -> bool:
            return sum(1 for m in ms if m.body == b"flaky") >= 2 and len(ms) >= 6

        assert collector.wait_for(done, 30), [m.body for m in collector.messages]
        flaky = [m.delivery_attempt for m in collector.messages if m.body == b"flaky"]
        assert flaky[:2] == [1, 2]
        assert sorted(m.body for m in collector.messages if m.body != b"flaky") == [
            f"push-{i}".encode() for i in range(4)]
    finally:
        consumer.shutdown()
