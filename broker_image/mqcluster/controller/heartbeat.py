"""Broker liveness from heartbeats: pure, with the time passed in.

Not replicated (as RocketMQ's BrokerHeartbeatManager): every controller keeps
what the brokers tell it, only the active one acts on it. A broker is alive
while ``now - last_update < heartbeat_timeout``; a closed connection removes
every broker that heartbeated over it at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mqcluster.controller.elect_policy import Candidate
from mqcluster.protocol.controller import BrokerHeartbeatRequestHeader


@dataclass
class BrokerLiveInfo:
    cluster_name: str
    broker_name: str
    broker_addr: str
    broker_id: int
    last_update_ms: int
    heartbeat_timeout_ms: int
    epoch: int = 0
    max_offset: int = 0
    confirm_offset: int = 0
    election_priority: int = 0
    conn: object | None = None

    def expired(self, now_ms: int) -> bool:
        return now_ms - self.last_update_ms >= self.heartbeat_timeout_ms

    def candidate(self) -> Candidate:
        return Candidate(self.broker_id, self.epoch, self.max_offset, self.election_priority)


BrokerKey = tuple[str, int]


class HeartbeatTable:
    def __init__(self, default_timeout_ms: int) -> None:
        self.default_timeout_ms = default_timeout_ms
        self._live: dict[BrokerKey, BrokerLiveInfo] = {}

    def __len__(self) -> int:
        return len(self._live)

    def on_heartbeat(
        self, h: BrokerHeartbeatRequestHeader, now_ms: int, conn: object | None = None
    ) -> BrokerLiveInfo | None:
        """Record a heartbeat; one without a broker id (not yet registered) is ignored."""
        if h.broker_id is None:
            return None
        key = (h.broker_name, h.broker_id)
        prev = self._live.get(key)
        timeout = h.heartbeat_timeout_mills or self.default_timeout_ms
        info = BrokerLiveInfo(
            h.cluster_name,
            h.broker_name,
            h.broker_addr,
            h.broker_id,
            now_ms,
            timeout,
            h.epoch if h.epoch is not None else (prev.epoch if prev else 0),
            h.max_offset if h.max_offset is not None else (prev.max_offset if prev else 0),
            h.confirm_offset
            if h.confirm_offset is not None
            else (prev.confirm_offset if prev else 0),
            h.election_priority
            if h.election_priority is not None
            else (prev.election_priority if prev else 0),
            conn if conn is not None else (prev.conn if prev else None),
        )
        self._live[key] = info
        return info

    def get(self, broker_name: str, broker_id: int) -> BrokerLiveInfo | None:
        return self._live.get((broker_name, broker_id))

    def is_alive(self, broker_name: str, broker_id: int, now_ms: int) -> bool:
        info = self._live.get((broker_name, broker_id))
        return info is not None and not info.expired(now_ms)

    def candidates(self, broker_name: str, now_ms: int) -> dict[int, Candidate]:
        return {
            bid: info.candidate()
            for (name, bid), info in self._live.items()
            if name == broker_name and not info.expired(now_ms)
        }

    def alive_count(self, now_ms: int) -> int:
        return sum(1 for info in self._live.values() if not info.expired(now_ms))

    def pop_expired(self, now_ms: int) -> list[BrokerLiveInfo]:
        dead = [info for info in self._live.values() if info.expired(now_ms)]
        for info in dead:
            del self._live[(info.broker_name, info.broker_id)]
        return dead

    def pop_connection(self, conn: object) -> list[BrokerLiveInfo]:
        dead = [info for info in self._live.values() if info.conn is conn]
        for info in dead:
            del self._live[(info.broker_name, info.broker_id)]
        return dead

    def remove(self, broker_name: str, broker_ids: set[int] | None = None) -> None:
        for key in [k for k in self._live if k[0] == broker_name]:
            if broker_ids is None or key[1] in broker_ids:
                del self._live[key]

    def view(self, now_ms: int) -> LivenessView:
        return LivenessView(self, now_ms)


class LivenessView:
    """The table frozen at one instant, as the manager sees it."""

    def __init__(self, table: HeartbeatTable, now_ms: int) -> None:
        self._table = table
        self._now = now_ms

    def is_alive(self, broker_name: str, broker_id: int) -> bool:
        return self._table.is_alive(broker_name, broker_id, self._now)

    def candidates(self, broker_name: str) -> Mapping[int, Candidate]:
        return self._table.candidates(broker_name, self._now)


class StaticLiveness:
    """A fixed liveness answer, for tests and tools: ``{broker_name: {id: Candidate}}``."""

    def __init__(self, alive: Mapping[str, Mapping[int, Candidate]] | None = None) -> None:
        self.alive: dict[str, dict[int, Candidate]] = {
            name: dict(c) for name, c in (alive or {}).items()
        }

    def is_alive(self, broker_name: str, broker_id: int) -> bool:
        return broker_id in self.alive.get(broker_name, {})

    def candidates(self, broker_name: str) -> Mapping[int, Candidate]:
        return self.alive.get(broker_name, {})
