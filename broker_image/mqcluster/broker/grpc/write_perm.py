"""Whether the name servers took this broker group's write permission away
(``mqadmin wipeWritePerm``), for the routes the gRPC endpoint hands out.

A remoting client reads routes from the name servers, where the wipe is recorded; a
gRPC client reads them from this endpoint, so the endpoint asks the name servers too,
as RocketMQ's proxy builds its routes from theirs. Answers are kept ``ttl_s`` seconds;
a lookup that takes longer than ``wait_s`` (a slow or unreachable name server) leaves
the last known answer in force and finishes in the background.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol

from mqcluster.store.topic_config import PERM_WRITE

log = logging.getLogger(__name__)


class RouteSource(Protocol):
    """What is read from the name servers: ``NamesrvClient`` fits."""

    async def get_route(self, topic: str) -> object: ...


class NamesrvWritePerm:
    def __init__(self, source: RouteSource, broker_name: str, *, ttl_s: float = 3.0,
                 wait_s: float = 0.5, clock: Callable[[], float] = time.monotonic) -> None:
        self._source = source
        self._broker_name = broker_name
        self._ttl_s = ttl_s
        self._wait_s = wait_s
        self._clock = clock
        self._known: dict[str, tuple[float, bool]] = {}
        self._pending: dict[str, asyncio.Task[bool]] = {}

    async def wiped(self, topic: str) -> bool:
        """True when the name servers hold this group's queues of ``topic`` without
        the write permission."""
        known = self._known.get(topic)
        if known is not None and self._clock() - known[0] < self._ttl_s:
            return known[1]
        task = self._pending.get(topic)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._lookup(topic))
            self._pending[topic] = task
            task.add_done_callback(lambda _t: self._pending.pop(topic, None))
        try:
            return await asyncio.wait_for(asyncio.shield(task), self._wait_s)
        except TimeoutError:
            return known[1] if known is not None else False

    async def _lookup(self, topic: str) -> bool:
        try:
            route = await self._source.get_route(topic)
        except Exception as exc:  # (no route, no name server: nothing was wiped that we know)
            log.debug("write permission of %s on %s not known: %s", self._broker_name, topic, exc)
            wiped = False
        else:
            queues = [q for q in getattr(route, "queueDatas", [])
                      if getattr(q, "brokerName", None) == self._broker_name]
            wiped = bool(queues) and not any(q.perm & PERM_WRITE for q in queues)
        self._known[topic] = (self._clock(), wiped)
        return wiped
