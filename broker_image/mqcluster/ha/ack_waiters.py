"""Producers waiting for replicas: futures released when a predicate on an offset holds."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable

from mqcluster.common.pulse import time_out


class AckWaiters:
    """Waiters keyed by the commitlog end offset their write needs acknowledged.

    ``check(offset)`` tells whether a write ending at ``offset`` is acknowledged
    (by every SyncStateSet member, or by enough replicas); ``release()`` is called
    after every ack and set change and wakes those whose writes now qualify. Writes
    end in offset order, so the scan stops at the first that does not.
    """

    def __init__(self, check: Callable[[int], bool]) -> None:
        self._check = check
        self._heap: list[tuple[int, int, asyncio.Future[bool]]] = []
        self._seq = itertools.count()

    async def wait(self, end_offset: int, timeout_s: float) -> bool:
        if self._check(end_offset):
            return True
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        heapq.heappush(self._heap, (end_offset, next(self._seq), fut))
        # A timer on the future itself, not wait_for(shield(...)): those add two turns of
        # the event loop between the ack and the producer's answer.
        timer = loop.call_later(timeout_s, time_out, fut)
        try:
            return await fut
        finally:
            timer.cancel()
            if not fut.done():
                fut.cancel()

    def release(self) -> None:
        heap = self._heap
        while heap:
            end, _, fut = heap[0]
            if not fut.done() and not self._check(end):
                break
            heapq.heappop(heap)
            if not fut.done():
                fut.set_result(True)

    def fail_all(self) -> None:
        """The broker stopped being master: nobody will acknowledge these writes."""
        for _, _, fut in self._heap:
            if not fut.done():
                fut.set_result(False)
        self._heap.clear()

    def __len__(self) -> int:
        return len(self._heap)
