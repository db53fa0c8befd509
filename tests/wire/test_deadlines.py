"""One timer for a connection's request timeouts (fake loop time: ``looptime``)."""

import asyncio

import pytest

from mqcluster.wire.deadlines import Deadlines

pytestmark = pytest.mark.looptime


async def test_each_request_fails_at_its_own_deadline_in_any_order() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines()
    failed_at: dict[str, float] = {}
    futs = {name: loop.create_future() for name in ("long", "short", "middle")}
    for name, fut in futs.items():
        fut.add_done_callback(lambda f, n=name: failed_at.setdefault(n, loop.time()))
    start = loop.time()
    deadlines.add(futs["long"], 3.0)
    deadlines.add(futs["short"], 1.0)  # added later, due earlier
    deadlines.add(futs["middle"], 2.0)
    await asyncio.sleep(5)
    assert {n: round(t - start, 3) for n, t in failed_at.items()} == {
        "short": 1.0, "middle": 2.0, "long": 3.0}
    for fut in futs.values():
        assert isinstance(fut.exception(), TimeoutError)
    assert len(deadlines) == 0


async def test_an_answered_request_is_left_alone_and_dropped_at_its_deadline() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines()
    answered, silent = loop.create_future(), loop.create_future()
    deadlines.add(answered, 1.0)
    deadlines.add(silent, 2.0)
    answered.set_result("ok")
    await asyncio.sleep(1.5)
    assert answered.result() == "ok" and not silent.done()
    assert len(deadlines) == 1
    await asyncio.sleep(1)
    assert isinstance(silent.exception(), TimeoutError)


async def test_close_stops_the_timer() -> None:
    loop = asyncio.get_running_loop()
    deadlines = Deadlines()
    fut = loop.create_future()
    deadlines.add(fut, 1.0)
    deadlines.close()
    await asyncio.sleep(2)
    assert not fut.done()
