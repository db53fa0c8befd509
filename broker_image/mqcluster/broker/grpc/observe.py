"""Traffic counters of the endpoint, fed into the broker's Prometheus metrics when given."""

from __future__ import annotations

from typing import Any


class TrafficObserver:
    """Counts delivered messages and sends refused before the message service saw them
    (it counts the rest); ``metrics`` is a ``BrokerMetrics`` or None."""

    def __init__(self, metrics: Any | None) -> None:
        self._m = metrics

    def delivered(self, topic: str, size: int) -> None:
        if self._m is not None:
            self._m.messages_out.labels(**self._m.labels, topic=topic).inc()
            self._m.bytes_out.labels(**self._m.labels, topic=topic).inc(size)

    def refused(self, status: str) -> None:
        if self._m is not None:
            self._m.put_errors.labels(**self._m.labels, status=status).inc()
