"""Connected clients: what each one publishes or subscribes, and its telemetry sink."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from mqcluster.broker.messaging.transaction import CheckRequest

CommandSink = Callable[[CheckRequest], None]


class ClientKind(IntEnum):
    """Numbered as ``apache.rocketmq.v2.ClientType``."""

    UNSPECIFIED = 0
    PRODUCER = 1
    PUSH_CONSUMER = 2
    SIMPLE_CONSUMER = 3
    PULL_CONSUMER = 4
    LITE_PUSH_CONSUMER = 5
    LITE_SIMPLE_CONSUMER = 6


@dataclass
class ClientSession:
    client_id: str
    kind: ClientKind = ClientKind.UNSPECIFIED
    group: str | None = None
    topics: set[str] = field(default_factory=set)
    last_seen_ms: int = 0
    sink: CommandSink | None = None


class ClientRegistry:
    def __init__(self) -> None:
        self._sessions: dict[str, ClientSession] = {}

    def touch(self, client_id: str, now_ms: int, *, kind: ClientKind | None = None,
              group: str | None = None, topics: set[str] | None = None) -> ClientSession:
        s = self._sessions.get(client_id)
        if s is None:
            s = self._sessions[client_id] = ClientSession(client_id)
        s.last_seen_ms = now_ms
        if kind is not None and kind is not ClientKind.UNSPECIFIED:
            s.kind = kind
        if group:
            s.group = group
        if topics is not None:
            s.topics = set(topics)
        return s

    def get(self, client_id: str) -> ClientSession | None:
        return self._sessions.get(client_id)

    def attach(self, client_id: str, sink: CommandSink) -> None:
        self._sessions.setdefault(client_id, ClientSession(client_id)).sink = sink

    def detach(self, client_id: str, sink: CommandSink) -> None:
        s = self._sessions.get(client_id)
        if s is not None and s.sink is sink:
            s.sink = None

    def remove(self, client_id: str) -> None:
        self._sessions.pop(client_id, None)

    def expire(self, older_than_ms: int) -> list[str]:
        gone = [cid for cid, s in self._sessions.items()
                if s.last_seen_ms < older_than_ms and s.sink is None]
        for cid in gone:
            del self._sessions[cid]
        return gone

    def alive(self, client_id: str, since_ms: int) -> bool:
        """Connected now (telemetry stream open) or seen at or after ``since_ms``."""
        s = self._sessions.get(client_id)
        return s is not None and (s.sink is not None or s.last_seen_ms >= since_ms)

    def producer_sink(self, topic: str) -> CommandSink | None:
        """A telemetry sink of a producer that publishes ``topic`` (else of any producer)."""
        fallback: CommandSink | None = None
        for s in sorted(self._sessions.values(), key=lambda s: -s.last_seen_ms):
            if s.kind is not ClientKind.PRODUCER or s.sink is None:
                continue
            if topic in s.topics:
                return s.sink
            fallback = fallback or s.sink
        return fallback

    def describe(self) -> list[dict[str, Any]]:
        """Every known client as mqadmin's connection lists show it."""
        return [{"clientId": s.client_id, "kind": s.kind.name, "group": s.group,
                 "topics": sorted(s.topics), "connected": s.sink is not None,
                 "lastSeenMs": s.last_seen_ms}
                for s in sorted(self._sessions.values(), key=lambda s: s.client_id)]

    def __len__(self) -> int:
        return len(self._sessions)
