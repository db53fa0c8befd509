"""The proxy's Prometheus metrics and its HTTP endpoint (``/metrics``, ``/health``).

Availability is read from the master tracker at each scrape: whether the proxy knows a
master it can forward to, and that master's epoch; master changes are counted as the
tracker reports them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.exposition import generate_latest

from mqcluster.broker.context import ReplicaRole
from mqcluster.common.http_endpoint import MetricsEndpoint


class ProxyMetrics:
    def __init__(self, broker: str, role: Callable[[], ReplicaRole]) -> None:
        self.broker = broker
        self.role = role
        self.registry = CollectorRegistry()
        r = self.registry
        self.master_known = Gauge(
            "mqproxy_master_known",
            "1 while the proxy knows the group's master and its gRPC endpoint (calls are "
            "forwarded), 0 while they wait for one",
            ["broker"], registry=r)
        self.master_epoch = Gauge(
            "mqproxy_master_epoch", "Master epoch of the master the proxy forwards to",
            ["broker"], registry=r)
        self.master_changes = Counter(
            "mqproxy_master_changes", "Times the proxy moved to another master",
            ["broker"], registry=r)
        self.lookup_failures = Counter(
            "mqproxy_master_lookup_failures",
            "Failed looks at who the master is (controllers or name servers unreachable)",
            ["broker"], registry=r)
        self._changes = self.master_changes.labels(broker)
        self._failures = self.lookup_failures.labels(broker)
        self._last_master: str | None = None

    def role_changed(self, old: ReplicaRole, new: ReplicaRole) -> None:
        """A tracker listener: count a move to another master (not the first one, and a
        master lost then found again is no move)."""
        if new.master_addr is None:
            return
        if self._last_master is not None and new.master_addr != self._last_master:
            self._changes.inc()
        self._last_master = new.master_addr

    def lookup_failed(self) -> None:
        self._failures.inc()

    def exposition(self) -> bytes:
        role = self.role()
        self.master_known.labels(self.broker).set(1 if role.master_grpc else 0)
        self.master_epoch.labels(self.broker).set(role.master_epoch)
        return generate_latest(self.registry)


class ProxyHttp(MetricsEndpoint):
    """``/metrics`` and ``/health`` of a proxy: UP while it knows its group's master."""

    def __init__(self, metrics: ProxyMetrics, host: str, port: int) -> None:
        super().__init__(host, port)
        self.metrics = metrics

    def exposition(self) -> bytes:
        return self.metrics.exposition()

    def health(self) -> tuple[int, Mapping[str, Any]]:
        role = self.metrics.role()
        return 200, {"status": "UP" if role.master_grpc else "NO_MASTER",
                     "brokerName": self.metrics.broker, "masterAddr": role.master_addr,
                     "masterGrpc": role.master_grpc, "masterEpoch": role.master_epoch}
