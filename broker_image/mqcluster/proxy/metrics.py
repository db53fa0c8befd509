"""The proxy's Prometheus metrics and its HTTP endpoint (``/metrics``, ``/health``).

Per group (label ``broker``): whether the proxy knows a master it can reach, that
master's epoch, master moves, and calls failed fast with a RocketMQ status because the
group's master could not be reached. ``/health`` says the same per group.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.exposition import generate_latest
from rocketmq.grpc_protocol import definition_pb2 as pb

from mqcluster.common.http_endpoint import MetricsEndpoint
from mqcluster.proxy.groups import UP, GroupState, GroupTable


class ProxyMetrics:
    def __init__(self, table: GroupTable) -> None:
        self.table = table
        self.registry = CollectorRegistry()
        r = self.registry
        self.master_known = Gauge(
            "mqproxy_master_known",
            "1 while the proxy knows the group's master and its gRPC endpoint, 0 while the "
            "group has none", ["broker"], registry=r)
        self.group_up = Gauge(
            "mqproxy_group_up",
            "1 while the group's master answers the proxy (calls are forwarded), 0 while "
            "its calls fail fast", ["broker"], registry=r)
        self.master_epoch = Gauge(
            "mqproxy_master_epoch", "Master epoch of the master the proxy forwards to",
            ["broker"], registry=r)
        self.master_changes = Counter(
            "mqproxy_master_changes", "Times the proxy moved to another master",
            ["broker"], registry=r)
        self.failed_fast = Counter(
            "mqproxy_calls_failed_fast",
            "Calls answered with a RocketMQ status at once because the group's master "
            "could not be reached", ["broker", "code"], registry=r)
        self.lookup_failures = Counter(
            "mqproxy_master_lookup_failures",
            "Failed looks at the masters (controllers or name servers unreachable)",
            ["source"], registry=r)
        self._last_master: dict[str, str] = {}

    def master_changed(self, old: GroupState | None, new: GroupState) -> None:
        """A table listener: count a move to another master (not a group's first one,
        and a master lost then found again is no move)."""
        if new.master_addr is None:
            return
        last = self._last_master.get(new.name)
        if last is not None and last != new.master_addr:
            self.master_changes.labels(new.name).inc()
        self._last_master[new.name] = new.master_addr

    def lookup_failed(self, source: str) -> None:
        self.lookup_failures.labels(source).inc()

    def call_failed_fast(self, group: str, code: int) -> None:
        self.failed_fast.labels(group, pb.Code.Name(code)).inc()

    def exposition(self) -> bytes:
        health = self.table.health()
        for name, state in self.table.groups.items():
            self.master_known.labels(name).set(1 if state.grpc else 0)
            self.group_up.labels(name).set(1 if health[name] == UP else 0)
            self.master_epoch.labels(name).set(max(state.epoch, 0))
        return generate_latest(self.registry)


class ProxyHttp(MetricsEndpoint):
    """``/metrics`` and ``/health``: per group UP, DOWN (its master does not answer) or
    NO_MASTER; the proxy is UP while every group is, DEGRADED while some are not. The
    HTTP status is 503 (not ready) while it drains or knows no group yet, else 200: a
    proxy that cannot reach one group still serves the others."""

    def __init__(self, metrics: ProxyMetrics, host: str, port: int,
                 draining: Callable[[], bool] = lambda: False) -> None:
        super().__init__(host, port)
        self.metrics = metrics
        self.draining = draining

    def exposition(self) -> bytes:
        return self.metrics.exposition()

    def health(self) -> tuple[int, Mapping[str, Any]]:
        return health_of(self.metrics.table, self.draining())


def health_of(table: GroupTable, draining: bool) -> tuple[int, dict[str, Any]]:
    per_group = table.health()
    groups = {name: {"status": per_group[name], "masterAddr": s.master_addr,
                     "masterGrpc": s.grpc, "masterEpoch": s.epoch,
                     **({"reason": s.down_reason} if per_group[name] != UP and s.down_reason
                        else {})}
              for name, s in table.groups.items()}
    if draining:
        overall = "DRAINING"
    elif not groups:
        overall = "NO_GROUP"
    elif all(v == UP for v in per_group.values()):
        overall = "UP"
    elif any(v == UP for v in per_group.values()):
        overall = "DEGRADED"
    else:
        overall = "DOWN"
    code = 503 if overall in ("DRAINING", "NO_GROUP") else 200
    return code, {"status": overall, "groups": groups}
