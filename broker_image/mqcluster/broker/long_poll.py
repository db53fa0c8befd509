"""Wakes long-polling pulls when new messages reach a consume queue."""

from __future__ import annotations

import asyncio
import contextlib


class ArrivalNotifier:
    """``notify`` is the store's arrival listener; ``wait`` parks a pull until then."""

    def __init__(self) -> None:
        self._waiters: dict[tuple[str, int], set[asyncio.Future[None]]] = {}

    def notify(self, topic: str, queue_id: int, max_offset: int = 0) -> None:
        for fut in self._waiters.pop((topic, queue_id), set()):
            if not fut.done():
                fut.set_result(None)

    def wake_all(self) -> None:
        for key in list(self._waiters):
            self.notify(*key)

    @property
    def waiting(self) -> int:
        return sum(len(v) for v in self._waiters.values())

    async def wait(self, topic: str, queue_id: int, timeout: float) -> bool:
        """True when a message arrived, False on timeout.

        Register before any await: callers check the queue, then call ``wait``
        without yielding in between, so no arrival can slip through.
        """
        key = (topic, queue_id)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(key, set()).add(fut)
        try:
            await asyncio.wait_for(fut, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            waiters = self._waiters.get(key)
            if waiters is not None:
                waiters.discard(fut)
                if not waiters:
                    with contextlib.suppress(KeyError):
                        del self._waiters[key]
