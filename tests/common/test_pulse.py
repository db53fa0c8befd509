"""``Pulse``: waiters woken by the next fire or by their timeout (fake loop time)."""

from __future__ import annotations

import asyncio

import pytest

from mqcluster.common.pulse import Pulse

pytestmark = pytest.mark.looptime


async def test_fire_wakes_every_waiter_and_only_those_waiting() -> None:
    pulse = Pulse()
    waits = [asyncio.create_task(pulse.wait(10)) for _ in range(3)]
    await asyncio.sleep(1)
    pulse.fire()
    assert await asyncio.gather(*waits) == [True, True, True]
    assert len(pulse) == 0
    late = asyncio.create_task(pulse.wait(5))  # a fire before a wait is not remembered
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await late is False
    assert loop.time() - started == pytest.approx(5)


async def test_timed_out_and_cancelled_waiters_leave_no_trace() -> None:
    pulse = Pulse()
    for _ in range(100):  # a heartbeat loop with nothing to send
        assert await pulse.wait(0.5) is False
    assert len(pulse) == 0
    task = asyncio.create_task(pulse.wait(10))
    await asyncio.sleep(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(pulse) == 0
    pulse.fire()  # nothing left to wake, nothing fails
