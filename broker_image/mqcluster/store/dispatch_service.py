"""Runs the dispatcher on the event loop and lets callers wait for it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from mqcluster.store.dispatcher import Dispatcher

DISPATCH_BUDGET = 4 * 1024 * 1024


class DispatchService:
    """Dispatches up to ``limit()`` whenever woken, yielding to the loop between chunks."""

    def __init__(self, dispatcher: Dispatcher, limit: Callable[[], int]) -> None:
        self.dispatcher = dispatcher
        self.limit = limit
        self._wake: asyncio.Event | None = None
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    @property
    def running(self) -> bool:
        return self._wake is not None

    def wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def start(self) -> asyncio.Task[None]:
        self._wake = asyncio.Event()
        self._wake.set()
        return asyncio.get_running_loop().create_task(self._run(), name="store-dispatch")

    async def _run(self) -> None:
        assert self._wake is not None
        wake = self._wake
        try:
            while True:
                await wake.wait()
                wake.clear()
                while True:
                    moved = self.dispatcher.dispatch(self.limit(), DISPATCH_BUDGET)
                    self._release()
                    if moved == 0 or self.dispatcher.offset >= self.limit():
                        break
                    await asyncio.sleep(0)
        finally:
            self._wake = None
            for _, fut in self._waiters:
                fut.cancel()
            self._waiters = []

    def dispatch_now(self) -> None:
        """Dispatch right away on the caller's turn of the loop (after a local append)."""
        if self._wake is None:
            return
        self.dispatcher.dispatch(self.limit(), DISPATCH_BUDGET)
        self._release()
        if self.dispatcher.offset < self.limit():
            self._wake.set()

    def _release(self) -> None:
        done = self.dispatcher.offset
        keep = []
        for offset, fut in self._waiters:
            if fut.done():
                continue
            if offset <= done:
                fut.set_result(None)
            else:
                keep.append((offset, fut))
        self._waiters = keep

    async def wait(self, offset: int) -> None:
        """Wait until everything below ``offset`` is dispatched."""
        if self.dispatcher.offset >= offset:
            return
        if not self.running:
            self.dispatcher.dispatch(min(offset, self.limit()))
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((offset, fut))
        self.wake()
        await fut
