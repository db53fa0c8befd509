"""Timeouts of a connection's requests, with one timer for all of them.

A timer per request (``loop.call_later`` and its ``cancel``) makes the loop order
``TimerHandle`` objects by a Python ``__lt__`` on every request. Here deadlines are
plain ``(when, seq, future)`` tuples in a heap, compared in C; a single timer wakes at
the earliest one. Answered requests stay in the heap until their deadline passes (no
cancel on the hot path) and are then dropped without effect.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from typing import Any


class Deadlines:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, asyncio.Future[Any]]] = []
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, fut: asyncio.Future[Any], timeout: float) -> None:
        """``fut`` fails with TimeoutError ``timeout`` seconds from now unless done by then."""
        loop = fut.get_loop()
        when = loop.time() + timeout
        heapq.heappush(self._heap, (when, next(self._seq), fut))
        if when < self._timer_at:
            self._arm(loop, when)

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = loop.call_at(when, self._expire, loop)

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        self._timer_at = float("inf")
        heap = self._heap
        now = loop.time() + 1e-6  # (the loop may run a timer a hair before its time)
        while heap and (heap[0][0] <= now or heap[0][2].done()):
            fut = heapq.heappop(heap)[2]
            if not fut.done():
                fut.set_exception(TimeoutError())
        if heap:
            self._arm(loop, heap[0][0])

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._timer_at = float("inf")
        self._heap.clear()
