from __future__ import annotations

import asyncio

from mqcluster.broker.long_poll import ArrivalNotifier


async def test_notify_wakes_only_that_queue() -> None:
    arrivals = ArrivalNotifier()
    a = asyncio.create_task(arrivals.wait("T", 0, 30))
    b = asyncio.create_task(arrivals.wait("T", 1, 30))
    await asyncio.sleep(0)
    assert arrivals.waiting == 2
    arrivals.notify("T", 0, 5)
    assert await a is True
    assert not b.done() and arrivals.waiting == 1
    arrivals.wake_all()
    assert await b is True
    assert arrivals.waiting == 0


async def test_wait_times_out() -> None:
    arrivals = ArrivalNotifier()
    assert await arrivals.wait("T", 0, 0.01) is False
    assert arrivals.waiting == 0
