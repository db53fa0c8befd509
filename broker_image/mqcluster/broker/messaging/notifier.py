"""Long-polling wake-ups: receivers wait for new entries on the topics they read."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable


class Ticket:
    def __init__(self, topics: tuple[str, ...], future: asyncio.Future[None]) -> None:
        self.topics = topics
        self.future = future


class ArrivalNotifier:
    """Take a ticket *before* looking for messages, so no arrival falls in between."""

    def __init__(self) -> None:
        self._waiters: dict[str, set[Ticket]] = {}

    def ticket(self, topics: Iterable[str]) -> Ticket:
        t = Ticket(tuple(topics), asyncio.get_running_loop().create_future())
        for topic in t.topics:
            self._waiters.setdefault(topic, set()).add(t)
        return t

    def release(self, ticket: Ticket) -> None:
        for topic in ticket.topics:
            waiting = self._waiters.get(topic)
            if waiting is not None:
                waiting.discard(ticket)
                if not waiting:
                    del self._waiters[topic]
        if not ticket.future.done():
            ticket.future.cancel()

    async def wait(self, ticket: Ticket, timeout_s: float) -> bool:
        """True when woken by an arrival, False on timeout; the ticket is used up."""
        try:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(ticket.future), max(0.0, timeout_s))
            return ticket.future.done() and not ticket.future.cancelled()
        finally:
            self.release(ticket)

    def notify(self, topic: str, queue_id: int = 0, max_offset: int = 0) -> None:
        for t in self._waiters.pop(topic, set()):
            if not t.future.done():
                t.future.set_result(None)

    def waiting(self) -> int:
        return sum(len(v) for v in self._waiters.values())
