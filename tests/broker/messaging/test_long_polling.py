from __future__ import annotations

import asyncio

from mqcluster.broker.messaging.consume import PopRequest
from mqcluster.broker.messaging.filter import MATCH_ALL
from mqcluster.broker.messaging.service import MessagingService
from tests.broker.messaging.helpers import msg, send


async def test_receive_is_woken_by_a_new_message(svc: MessagingService) -> None:
    req = PopRequest("g", "T", 0, MATCH_ALL, 4, 10_000)
    waiting = asyncio.create_task(svc.receive(req, long_polling_ms=20_000))
    while svc.notifier.waiting() == 0:
        await asyncio.sleep(0)
    await send(svc, msg(b"wake"))
    got = await asyncio.wait_for(waiting, 5)
    assert [d.message.body for d in got] == [b"wake"]
    assert svc.notifier.waiting() == 0


async def test_receive_times_out_empty(svc: MessagingService) -> None:
    req = PopRequest("g", "T", 0, MATCH_ALL, 4, 10_000)
    assert await svc.receive(req, long_polling_ms=50) == []
    assert svc.notifier.waiting() == 0


async def test_fifo_receiver_is_woken_by_an_ack(svc: MessagingService, mlog: object) -> None:
    from mqcluster.store.subscription_group import SubscriptionGroupConfig
    from tests.broker.messaging.helpers import fifo, pop

    svc.log.subscriptions.put(SubscriptionGroupConfig("g", consumeMessageOrderly=True))
    await send(svc, fifo(b"a1", "A"), fifo(b"a2", "A"))
    [first] = await pop(svc, batch=1)
    req = PopRequest("g", "T", 0, MATCH_ALL, 4, 10_000)
    waiting = asyncio.create_task(svc.receive(req, long_polling_ms=20_000))
    while svc.notifier.waiting() == 0:
        await asyncio.sleep(0)
    await svc.ack("g", first.receipt.encode())
    got = await asyncio.wait_for(waiting, 5)
    assert [d.message.body for d in got] == [b"a2"]
