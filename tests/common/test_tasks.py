"""cancel_all: every task cancelled and ended; an error other than the cancellation is not
swallowed."""

from __future__ import annotations

import asyncio

import pytest

from mqcluster.common.tasks import cancel_all


async def test_every_task_is_cancelled_and_has_ended() -> None:
    tasks = [asyncio.create_task(asyncio.Event().wait()) for _ in range(3)]
    await asyncio.sleep(0)
    await cancel_all(tasks)
    assert all(t.done() and t.cancelled() for t in tasks)


async def test_a_task_that_failed_on_its_own_raises_its_error() -> None:
    async def fails_on_cancel() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise RuntimeError("cleanup failed") from None

    task = asyncio.create_task(fails_on_cancel())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="cleanup failed"):
        await cancel_all([task])
