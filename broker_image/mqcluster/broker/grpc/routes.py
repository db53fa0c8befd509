"""Topic routes for QueryRoute and QueryAssignment; the provider is pluggable.

``LocalRouteProvider`` answers from this broker's own topic table (a single broker,
or Local mode without a name server). A name-server-backed provider implements the
same ``RouteProvider`` protocol and returns the queues of every broker of the topic.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

from mqcluster.broker.messaging.catalog import Catalog
from mqcluster.broker.messaging.kinds import MessageKind, accepted_kinds
from mqcluster.broker.messaging.service import ANY_QUEUE
from mqcluster.store.topic_config import PERM_READ, PERM_WRITE, TopicConfig

Address = tuple[str, int]


class Permission(IntEnum):
    """Numbered as ``apache.rocketmq.v2.Permission``."""

    NONE = 1
    READ = 2
    WRITE = 3
    READ_WRITE = 4


@dataclass(frozen=True)
class QueueRoute:
    topic: str
    queue_id: int
    permission: Permission
    broker_name: str
    broker_id: int
    endpoints: tuple[Address, ...]
    accept: tuple[MessageKind, ...]


class RouteProvider(Protocol):
    async def route(self, topic: str, access_point: tuple[Address, ...]) -> list[QueueRoute]:
        """Every queue of ``topic``; raises MessagingError(TOPIC_NOT_FOUND) if unknown."""
        ...

    async def assignment(self, topic: str, group: str,
                         access_point: tuple[Address, ...]) -> list[QueueRoute]:
        """The queues a push consumer of ``group`` should receive from."""
        ...


def parse_address(text: str) -> Address:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def queue_permission(config: TopicConfig, queue_id: int,
                     broker_permission: int = PERM_READ | PERM_WRITE) -> Permission:
    """A queue's permission in a route: the topic's perm ANDed with the broker's."""
    perm = config.perm & broker_permission
    readable = bool(perm & PERM_READ) and queue_id < config.readQueueNums
    writable = bool(perm & PERM_WRITE) and queue_id < config.writeQueueNums
    if readable and writable:
        return Permission.READ_WRITE
    if readable:
        return Permission.READ
    if writable:
        return Permission.WRITE
    return Permission.NONE


class LocalRouteProvider:
    """``write_wiped(topic)``, when given, says whether the name servers took this
    group's write permission away (``NamesrvWritePerm``): the routes then say READ."""

    def __init__(self, catalog: Catalog, broker_name: str, broker_id: int = 0,
                 advertised: Address | None = None,
                 write_wiped: Callable[[str], Awaitable[bool]] | None = None) -> None:
        self._catalog = catalog
        self._broker_name = broker_name
        self._broker_id = broker_id
        self._advertised = advertised
        self._write_wiped = write_wiped

    async def _broker_perm(self, topic: str) -> int:
        perm = self._catalog.broker_permission()
        if perm & PERM_WRITE and self._write_wiped is not None and await self._write_wiped(topic):
            perm &= ~PERM_WRITE
        return perm

    def _routes(self, config: TopicConfig, access_point: tuple[Address, ...],
                broker_perm: int) -> list[QueueRoute]:
        endpoints = (self._advertised,) if self._advertised else access_point
        accept = accepted_kinds(config)
        return [
            QueueRoute(config.topicName, q, queue_permission(config, q, broker_perm),
                       self._broker_name, self._broker_id, endpoints, accept)
            for q in range(max(config.readQueueNums, config.writeQueueNums))
        ]

    async def route(self, topic: str, access_point: tuple[Address, ...]) -> list[QueueRoute]:
        config = self._catalog.topic(topic)
        return self._routes(config, access_point, await self._broker_perm(topic))

    async def assignment(self, topic: str, group: str,
                         access_point: tuple[Address, ...]) -> list[QueueRoute]:
        """One assignment for this broker with queue id -1: receive from all its queues."""
        config = self._catalog.topic(topic, create=False)
        broker_perm = await self._broker_perm(topic)
        perm_bits = config.perm & broker_perm
        if not (perm_bits & PERM_READ and config.readQueueNums > 0):
            return []
        endpoints = (self._advertised,) if self._advertised else access_point
        perm = Permission.READ_WRITE if perm_bits & PERM_WRITE else Permission.READ
        return [QueueRoute(topic, ANY_QUEUE, perm, self._broker_name, self._broker_id,
                           endpoints, accepted_kinds(config))]

