from __future__ import annotations

import asyncio

import pytest

from mqcluster.client import BrokerError, Message, Producer, PullConsumer, PullStatus
from tests.client.conftest import BrokerFactory


async def test_concurrent_sends_share_requests_and_get_their_own_results(
    broker_factory: BrokerFactory,
) -> None:
    server = await broker_factory(flushDiskType="SYNC_FLUSH")
    addr = server.context.addresses.broker
    async with Producer(broker_addr=addr, retries=0, auto_batch=True) as producer:
        await producer.send(Message("AB", b"warm-up"))
        rounds = server.context.store.flush_rounds
        msgs = [Message("AB", f"m{i}".encode(), tags="T") for i in range(50)]
        results = await asyncio.gather(*(producer.send(m) for m in msgs))
    assert server.context.store.flush_rounds - rounds < 10
    assert len({r.msg_id for r in results}) == 50
    assert all(r.msg_id == m.properties["UNIQ_KEY"] for r, m in zip(results, msgs, strict=True))
    queue = results[0].queue
    assert all(r.queue == queue for r in results)
    assert [r.queue_offset for r in results] == list(range(results[0].queue_offset,
                                                            results[0].queue_offset + 50))
    consumer = PullConsumer("G", broker_addr=addr)
    try:
        got = await consumer.pull(queue, results[0].queue_offset, 64)
    finally:
        await consumer.close()
    assert got.status is PullStatus.FOUND
    assert [m.body for m in got.messages] == [m.body for m in msgs]
    assert [m.msg_id for m in got.messages] == [r.msg_id for r in results]


async def test_a_refused_message_fails_only_its_sender(broker_factory: BrokerFactory) -> None:
    server = await broker_factory(maxMessageSize="1000")
    addr = server.context.addresses.broker
    async with Producer(broker_addr=addr, retries=0, auto_batch=True) as producer:
        sends = [producer.send(Message("AB2", b"x" * (999 if i == 2 else 10))) for i in range(4)]
        sends.append(producer.send(Message("AB2", b"y", properties={"big": "z" * 40_000})))
        outcomes = await asyncio.gather(*sends, return_exceptions=True)
    assert [isinstance(o, BrokerError) for o in outcomes] == [False, False, False, False, True]
    with pytest.raises(BrokerError):
        raise outcomes[-1]  # type: ignore[misc]
