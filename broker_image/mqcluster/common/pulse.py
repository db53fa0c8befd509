"""``Pulse``: wake every waiter at the next ``fire()``, or at its own timeout.

What ``asyncio.timeout`` around ``Event.wait`` does, for a loop's hot path: one future
and one timer per wait. The event-and-timeout pair costs a timeout context manager,
and on Python 3.11 two running-loop lookups, each a getpid system call, on every wait;
the HA master's senders wait once per write burst.
"""

from __future__ import annotations

import asyncio
import contextlib


def time_out(fut: asyncio.Future[bool]) -> None:
    """A timer's callback for a wait on ``fut``: it ends with False unless already done."""
    if not fut.done():
        fut.set_result(False)


class Pulse:
    def __init__(self) -> None:
        self._waiters: list[asyncio.Future[bool]] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    def fire(self) -> None:
        """Wake everyone waiting now (later waits wait for the next fire)."""
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(True)

    async def wait(self, timeout_s: float) -> bool:
        """True when woken by ``fire()``, False after ``timeout_s`` seconds."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        self._waiters.append(fut)
        timer = loop.call_later(timeout_s, time_out, fut)
        try:
            woken = await fut
        finally:
            timer.cancel()
            if fut.cancelled() or not fut.done() or not fut.result():
                with contextlib.suppress(ValueError):  # (fire() takes the woken ones)
                    self._waiters.remove(fut)
        return woken

    def __len__(self) -> int:
        return len(self._waiters)
