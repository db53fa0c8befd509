"""Where a topic's queues live: asked of the name servers, or of one broker directly."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mqcluster.client.broker_api import BrokerApi
from mqcluster.client.errors import ClientError
from mqcluster.client.message import MessageQueue
from mqcluster.client.namesrv import NamesrvClient, NamesrvError, TopicNotExistError
from mqcluster.protocol.namesrv import MASTER_ID, PERM_READ, PERM_WRITE, TopicRouteData

ROUTE_TTL = 30.0


class NoRouteError(ClientError):
    """No broker serves the topic (or none is reachable)."""


@dataclass
class TopicRoute:
    topic: str
    brokers: dict[str, str] = field(default_factory=dict)
    """brokerName -> master address."""
    write_queues: list[MessageQueue] = field(default_factory=list)
    read_queues: list[MessageQueue] = field(default_factory=list)

    def addr_of(self, queue: MessageQueue) -> str:
        try:
            return self.brokers[queue.broker_name]
        except KeyError:
            raise NoRouteError(f"no master address for broker {queue.broker_name!r}") from None


def route_from_namesrv(topic: str, data: TopicRouteData) -> TopicRoute:
    route = TopicRoute(topic)
    for broker in data.brokerDatas:
        addr = broker.brokerAddrs.get(MASTER_ID)
        if addr:
            route.brokers[broker.brokerName] = addr
    for qd in sorted(data.queueDatas, key=lambda q: q.brokerName):
        if qd.brokerName not in route.brokers:
            continue
        if qd.perm & PERM_WRITE:
            route.write_queues += [
                MessageQueue(topic, qd.brokerName, i) for i in range(qd.writeQueueNums)
            ]
        if qd.perm & PERM_READ:
            route.read_queues += [
                MessageQueue(topic, qd.brokerName, i) for i in range(qd.readQueueNums)
            ]
    return route


class RouteResolver:
    """Resolves topics to queues; cached for ``ttl`` seconds or until ``invalidate``.

    With ``namesrv_addr`` the name servers are asked; with ``broker_addr`` that
    broker's topic table is (a topic it does not know yet gets
    ``default_queue_nums`` write queues, for brokers that auto-create topics).
    """

    def __init__(
        self,
        api: BrokerApi,
        *,
        namesrv_addr: str | None = None,
        broker_addr: str | None = None,
        default_queue_nums: int = 4,
        ttl: float = ROUTE_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not namesrv_addr and not broker_addr:
            raise ValueError("give namesrv_addr or broker_addr")
        self.api = api
        self.namesrv = NamesrvClient(namesrv_addr, rpc=api.rpc) if namesrv_addr else None
        self.broker_addr = broker_addr
        self.default_queue_nums = default_queue_nums
        self.ttl = ttl
        self.clock = clock
        self._cache: dict[str, tuple[float, TopicRoute]] = {}
        self._broker_name: str | None = None

    def invalidate(self, topic: str) -> None:
        self._cache.pop(topic, None)

    def cached(self, topic: str) -> TopicRoute | None:
        """The route still fresh in the cache, without a wait (the per-send hot path)."""
        cached = self._cache.get(topic)
        if cached is not None and self.clock() - cached[0] < self.ttl:
            return cached[1]
        return None

    async def route(self, topic: str, *, for_write: bool = False) -> TopicRoute:
        cached = self.cached(topic)
        if cached is not None:
            return cached
        route = await self._fetch(topic, for_write)
        if route.read_queues or route.write_queues:
            self._cache[topic] = (self.clock(), route)
        return route

    async def _fetch(self, topic: str, for_write: bool) -> TopicRoute:
        if self.namesrv is not None:
            try:
                data = await self.namesrv.get_route(topic)
            except TopicNotExistError as exc:
                raise NoRouteError(str(exc)) from exc
            except NamesrvError as exc:
                raise NoRouteError(f"route of {topic!r}: {exc}") from exc
            return route_from_namesrv(topic, data)
        assert self.broker_addr is not None
        addr = self.broker_addr
        if self._broker_name is None:
            info = await self.api.runtime_info(addr)
            self._broker_name = info.get("brokerName", addr)
        name = self._broker_name
        topics = await self.api.get_all_topic_config(addr)
        cfg = topics.get(topic)
        route = TopicRoute(topic, {name: addr})
        if cfg is None:
            if not for_write:
                raise NoRouteError(f"topic {topic!r} does not exist on broker {addr}")
            route.write_queues = [
                MessageQueue(topic, name, i) for i in range(self.default_queue_nums)
            ]
            return route
        if cfg.perm & PERM_WRITE:
            route.write_queues = [MessageQueue(topic, name, i) for i in range(cfg.writeQueueNums)]
        if cfg.perm & PERM_READ:
            route.read_queues = [MessageQueue(topic, name, i) for i in range(cfg.readQueueNums)]
        return route
