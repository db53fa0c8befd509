"""Group commit: one fsync serves every producer waiting when it starts (``GroupCommitService``).

SYNC_FLUSH: producers register the offset they need on disk and wake the flusher; it
fsyncs everything written so far in a worker thread, then wakes every producer it
covered. Requests arriving during an fsync are served together by the next one.
ASYNC_FLUSH: the flusher fsyncs every ``interval`` seconds when something was written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor

from mqcluster.store.commitlog import CommitLog

log = logging.getLogger(__name__)


def _resolve(fut: asyncio.Future[bool], value: bool) -> None:
    if not fut.done():
        fut.set_result(value)


class GroupCommitFlusher:
    def __init__(self, commitlog: CommitLog, executor: Executor, sync: bool,
                 interval_s: float) -> None:
        self.commitlog = commitlog
        self.executor = executor
        self.sync = sync
        self.interval_s = interval_s
        self.flushed_timestamp = 0
        self.rounds = 0
        self.observe: Callable[[float], None] | None = None
        """Given the seconds of each fsync round (the metrics' histogram)."""
        self.lock = asyncio.Lock()
        self._waiters: list[tuple[int, asyncio.Future[bool], float]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._expiry: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="commitlog-flush")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.flush_now()

    async def wait_flushed(self, offset: int, timeout_s: float) -> bool:
        """Wait until the commitlog is fsynced below ``offset``; ``False`` on timeout."""
        if offset <= self.commitlog.flushed_offset:
            return True
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        deadline = loop.time() + timeout_s
        self._waiters.append((offset, fut, deadline))
        self._wake.set()
        if self._expiry is None or deadline < self._expiry.when():
            if self._expiry is not None:
                self._expiry.cancel()
            self._expiry = loop.call_at(deadline, self._expire)
        return await fut

    def _expire(self) -> None:
        """Answer ``False`` to waiters past their deadline; one timer serves all waiters."""
        self._expiry = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        keep = []
        for waiter in self._waiters:
            if waiter[2] <= now:
                _resolve(waiter[1], False)
            elif not waiter[1].done():
                keep.append(waiter)
        self._waiters = keep
        if keep:
            self._expiry = loop.call_at(min(w[2] for w in keep), self._expire)

    async def _run(self) -> None:
        while True:
            if self.sync:
                await self._wake.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.interval_s)
            self._wake.clear()
            await self.flush_now()

    async def flush_now(self) -> None:
        async with self.lock:
            cl = self.commitlog
            target, timestamp = cl.max_offset, cl.last_store_timestamp
            ok = True
            if target > cl.flushed_offset:
                started = time.perf_counter()
                try:
                    await asyncio.get_running_loop().run_in_executor(
                        self.executor, cl.fsync_range, cl.flushed_offset, target)
                    cl.flushed_offset = max(cl.flushed_offset, target)
                    self.flushed_timestamp = timestamp
                    self.rounds += 1
                    if self.observe is not None:
                        self.observe(time.perf_counter() - started)
                except OSError:
                    log.exception("commitlog fsync failed")
                    ok = False
            self._release(ok)

    def _release(self, ok: bool) -> None:
        flushed = self.commitlog.flushed_offset
        keep: list[tuple[int, asyncio.Future[bool], float]] = []
        for waiter in self._waiters:
            offset, fut, _ = waiter
            if fut.done():
                continue
            if offset <= flushed:
                fut.set_result(True)
            elif not ok:
                fut.set_result(False)
            else:
                keep.append(waiter)
        self._waiters = keep
        if keep:
            self._wake.set()
        elif self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
