"""Prometheus metrics of one controller (a per-process registry) and its HTTP endpoint.

``/metrics``: the Prometheus exposition; ``/health``: JSON with the role, the
term, the active controller and the most recent elections.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

from mqcluster.common.http_endpoint import MetricsEndpoint

if TYPE_CHECKING:
    from mqcluster.controller.statemachine import ControllerState

GROUP_LABELS = ["cluster", "broker"]


class GroupCollector(Collector):
    """Per broker group, read from the replicated state at each scrape (every
    controller has it; a follower's may be a moment behind the active one's)."""

    def __init__(self, state: ControllerState) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        has_master = GaugeMetricFamily(
            "mqcontroller_group_has_master", "1 while the group has a master", labels=GROUP_LABELS)
        master_id = GaugeMetricFamily(
            "mqcontroller_group_master_broker_id", "Broker id of the group's master",
            labels=GROUP_LABELS)
        epoch = GaugeMetricFamily(
            "mqcontroller_group_master_epoch", "The group's master epoch", labels=GROUP_LABELS)
        size = GaugeMetricFamily(
            "mqcontroller_sync_state_set_size", "Members of the group's SyncStateSet",
            labels=GROUP_LABELS)
        member = GaugeMetricFamily(
            "mqcontroller_sync_state_set_member", "1 for each broker id in the SyncStateSet",
            labels=[*GROUP_LABELS, "broker_id"])
        replicas = GaugeMetricFamily(
            "mqcontroller_group_replicas", "Broker ids registered in the group",
            labels=GROUP_LABELS)
        for name, info in sorted(self.state.replica_info_table.items()):
            replicas.add_metric([info.cluster_name, name], len(info.brokers))
        for name, sync in sorted(self.state.sync_state_set_info_table.items()):
            labels = [sync.cluster_name, name]
            has_master.add_metric(labels, 1 if sync.master_broker_id is not None else 0)
            if sync.master_broker_id is not None:
                master_id.add_metric(labels, sync.master_broker_id)
            epoch.add_metric(labels, sync.master_epoch)
            size.add_metric(labels, len(sync.sync_state_set))
            for bid in sorted(sync.sync_state_set):
                member.add_metric([*labels, str(bid)], 1)
        yield from (has_master, master_id, epoch, size, member, replicas)


class ControllerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.is_leader = Gauge(
            "mqcontroller_is_leader", "1 on the active controller", registry=self.registry
        )
        self.role = Gauge(
            "mqcontroller_role", "Raft role of this controller", ["role"], registry=self.registry
        )
        self.term = Gauge("mqcontroller_term", "Raft term", registry=self.registry)
        self.elections = Counter(
            "mqcontroller_elections",
            "ElectMaster attempts by trigger and result",
            ["trigger", "result"],
            registry=self.registry,
        )
        self.master_changes = Counter(
            "mqcontroller_master_changes",
            "Elections that gave a group another master (the first one and failovers), on the "
            "controller that elected",
            GROUP_LABELS,
            registry=self.registry,
        )
        self.requests = Counter(
            "mqcontroller_requests",
            "Requests served, by request code and response code",
            ["code", "result"],
            registry=self.registry,
        )
        self.brokers_alive = Gauge(
            "mqcontroller_brokers_alive", "Brokers with a live heartbeat", registry=self.registry
        )
        self.broker_groups = Gauge(
            "mqcontroller_broker_groups", "Broker groups in the replicated state",
            registry=self.registry,
        )
        self.detection_seconds = Histogram(
            "mqcontroller_election_detection_seconds",
            "From a dead master's last heartbeat to the election decision",
            registry=self.registry,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 1.5, 2, 2.5, 3, 5, 10),
        )
        self.consensus_seconds = Histogram(
            "mqcontroller_election_consensus_seconds",
            "From proposing ElectMaster to applying it",
            registry=self.registry,
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1),
        )

    def watch_state(self, state: ControllerState) -> None:
        """Export the per-group gauges of ``state`` (read at scrape time)."""
        self.registry.register(GroupCollector(state))

    def set_role(self, role: str, term: int, leader: bool) -> None:
        for r in ("LEADER", "FOLLOWER", "CANDIDATE", "LEARNER"):
            self.role.labels(role=r).set(1 if r == role else 0)
        self.term.set(term)
        self.is_leader.set(1 if leader else 0)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class MetricsServer(MetricsEndpoint):
    """``/metrics`` and ``/health`` of a controller."""

    def __init__(
        self,
        metrics: ControllerMetrics,
        health: Callable[[], dict[str, Any]],
        host: str,
        port: int,
    ) -> None:
        super().__init__(host, port)
        self.metrics = metrics
        self._health_data = health

    def exposition(self) -> bytes:
        return self.metrics.exposition()

    def health(self) -> tuple[int, Mapping[str, Any]]:
        return 200, self._health_data()
