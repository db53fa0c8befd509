"""Prometheus metrics of one broker, in a per-process CollectorRegistry."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

if TYPE_CHECKING:
    from mqcluster.ha.master import HAMasterService

PUT_LATENCY_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
)

LAG_MEMORY = 64
"""Scrapes whose master end is remembered for the lag seconds of master-slave mode."""
FLUSH_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


@dataclass(frozen=True)
class ReplicationView:
    """What this broker knows of its replicas at a scrape (a master's view)."""

    sync_state_set: frozenset[int] | None = None
    """Controller mode, on the master: the SyncStateSet (master included)."""
    lag_bytes: dict[int, int] = field(default_factory=dict)
    """Commitlog bytes each slave is behind, by broker id."""
    lag_seconds: dict[int, float] | None = None
    """Seconds since each slave last had everything (None: not tracked; the scrapes then
    measure it, from ``master_offset``)."""
    master_offset: int = 0
    """The master's commitlog end now: a slave that has reached the end a previous scrape
    saw counts as caught up then (under steady load a slave is rarely at 0 bytes)."""


def ha_master_view(master: HAMasterService) -> ReplicationView:
    """A controller-mode master's view (empty on a slave), read from its SyncStateView."""
    view = master.view
    if view is None:
        return ReplicationView()
    now = master.now_ms()
    lag, seconds = {}, {}
    for bid, rp in view.replicas.items():
        lag[bid] = behind = max(0, view.master_max - rp.ack_offset)
        seconds[bid] = 0.0 if behind == 0 else max(0.0, (now - rp.last_caught_up_ms) / 1000)
    return ReplicationView(frozenset(view.members | {view.master_id}), lag, seconds)


class BrokerMetrics:
    """Counters and gauges the broker updates; ``registry`` is what /metrics exports."""

    def __init__(self, cluster: str, broker: str, registry: CollectorRegistry | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self.replication: Callable[[], ReplicationView] = ReplicationView
        """Set by the replication mode in use; read at every scrape."""
        self._caught_up_at: dict[int, float] = {}
        self._seen_ends: list[tuple[float, int]] = []
        """(time, master commitlog end) of the latest scrapes, oldest first."""
        self.registry = registry or CollectorRegistry()
        self.labels = {"cluster": cluster, "broker": broker}
        names = ["cluster", "broker"]
        r = self.registry
        self.messages_in = Counter(
            "rocketmq_messages_in", "Messages stored", [*names, "topic"], registry=r
        )
        self.messages_out = Counter(
            "rocketmq_messages_out",
            "Messages delivered to consumers",
            [*names, "topic"],
            registry=r,
        )
        self.bytes_in = Counter(
            "rocketmq_throughput_in", "Message body bytes stored", [*names, "topic"], registry=r
        )
        self.bytes_out = Counter(
            "rocketmq_throughput_out",
            "Message body bytes delivered",
            [*names, "topic"],
            registry=r,
        )
        self.put_latency = Histogram(
            "rocketmq_rpc_latency_put_seconds",
            "Time to store a message (or batch) until acknowledged",
            names,
            buckets=PUT_LATENCY_BUCKETS,
            registry=r,
        )
        self._put_latency = self.put_latency.labels(**self.labels)
        self._put_children: dict[str, tuple[Counter, Counter]] = {}
        self.flush_latency = Histogram(
            "rocketmq_store_flush_seconds",
            "Duration of one commitlog fsync round (one round serves every waiting producer)",
            names,
            buckets=FLUSH_BUCKETS,
            registry=r,
        )
        self.put_errors = Counter(
            "rocketmq_put_errors", "Rejected or failed sends", [*names, "status"], registry=r
        )
        self.commitlog_max_offset = Gauge(
            "rocketmq_commitlog_max_offset", "Commitlog max physical offset", names, registry=r
        )
        self.commitlog_min_offset = Gauge(
            "rocketmq_commitlog_min_offset", "Commitlog min physical offset", names, registry=r
        )
        self.dispatch_lag = Gauge(
            "rocketmq_dispatch_behind_bytes",
            "Commitlog bytes not yet dispatched to consume queues",
            names,
            registry=r,
        )
        self.consumer_lag = Gauge(
            "rocketmq_consumer_lag_messages",
            "Messages not yet consumed, per consumer group and topic",
            [*names, "group", "topic"],
            registry=r,
        )
        self.slave_lag = Gauge(
            "rocketmq_ha_slave_lag_bytes",
            "Commitlog bytes a slave is behind this master",
            [*names, "slave"],
            registry=r,
        )
        self.slave_lag_seconds = Gauge(
            "rocketmq_ha_slave_lag_seconds",
            "Seconds since a slave last had everything this master had",
            [*names, "slave"],
            registry=r,
        )
        self.is_master = Gauge(
            "rocketmq_broker_is_master",
            "1 on the group's master, 0 on a slave",
            [*names, "broker_id"],
            registry=r,
        )
        self.master_epoch = Gauge(
            "rocketmq_broker_master_epoch",
            "Master epoch this broker knows (controller mode; the Raft term in DLedger mode)",
            names,
            registry=r,
        )
        self.became_master = Counter(
            "rocketmq_broker_became_master",
            "Times this broker went from slave to master (failovers and switchovers; the first "
            "election after start-up too)",
            names,
            registry=r,
        )
        self.became_master.labels(**self.labels)  # exported at 0 until the first change
        self.confirm_offset = Gauge(
            "rocketmq_broker_confirm_offset",
            "Commitlog offset every SyncStateSet member has (what consumers may read up to)",
            names,
            registry=r,
        )
        self.sync_state_set_size = Gauge(
            "rocketmq_ha_sync_state_set_size",
            "Members of the SyncStateSet, master included (the master exports it)",
            names,
            registry=r,
        )
        self.sync_state_set_member = Gauge(
            "rocketmq_ha_sync_state_set_member",
            "1 for each broker id in the SyncStateSet (the master exports it)",
            [*names, "broker_id"],
            registry=r,
        )
        self.min_in_sync_replicas = Gauge(
            "rocketmq_broker_min_in_sync_replicas",
            "The minInSyncReplicas setting: fewer members refuse writes",
            names,
            registry=r,
        )
        self.disk_ratio = Gauge(
            "rocketmq_brokeruntime_commitlog_disk_ratio",
            "Used fraction (0-1) of the file system holding the store",
            names,
            registry=r,
        )
        self.group_diff = Gauge(
            "rocketmq_group_diff",
            "Messages not yet consumed, per consumer group and topic (rocketmq-exporter's name)",
            [*names, "group", "topic"],
            registry=r,
        )
        self.topics = Gauge("rocketmq_topic_number", "Topics on this broker", names, registry=r)
        self.connections = Gauge(
            "rocketmq_remoting_connections", "Open internal RPC connections", names, registry=r
        )

    def record_put(self, topic: str, count: int, nbytes: int, seconds: float) -> None:
        self.record_puts({topic: (count, nbytes)}, 1, seconds)

    def record_puts(self, stored: dict[str, tuple[int, int]], requests: int,
                    seconds: float) -> None:
        """``record_put`` for requests stored together in ``seconds``: ``stored`` maps
        each topic to its (messages, bytes); each request is one latency sample."""
        for topic, (count, nbytes) in stored.items():
            children = self._put_children.get(topic)
            if children is None:
                children = self._put_children[topic] = (
                    self.messages_in.labels(**self.labels, topic=topic),
                    self.bytes_in.labels(**self.labels, topic=topic),
                )
            children[0].inc(count)
            children[1].inc(nbytes)
        observe = self._put_latency.observe
        for _ in range(requests):
            observe(seconds)

    def record_put_error(self, status: str) -> None:
        self.put_errors.labels(**self.labels, status=status).inc()

    def record_get(self, topic: str, count: int, nbytes: int) -> None:
        if count:
            self.messages_out.labels(**self.labels, topic=topic).inc(count)
            self.bytes_out.labels(**self.labels, topic=topic).inc(nbytes)

    def role_changed(self, was_master: bool, is_master: bool) -> None:
        """A role listener's part: count a slave (or a starting broker) turning master."""
        if is_master and not was_master:
            self.became_master.labels(**self.labels).inc()

    def refresh_role(self, broker_id: int, is_master: bool, master_epoch: int,
                     min_in_sync_replicas: int, confirm_offset: int | None) -> None:
        """Scrape-time gauges of who this broker is in its group."""
        self.is_master.clear()  # the broker id can change (controller mode assigns it)
        self.is_master.labels(**self.labels, broker_id=str(broker_id)).set(
            1 if is_master else 0)
        self.master_epoch.labels(**self.labels).set(master_epoch)
        self.min_in_sync_replicas.labels(**self.labels).set(min_in_sync_replicas)
        if confirm_offset is not None:
            self.confirm_offset.labels(**self.labels).set(confirm_offset)

    def refresh_replication(self, view: ReplicationView) -> None:
        """Scrape-time gauges of the slaves and the SyncStateSet: a slave gone from the
        view (or a master turned slave) leaves no stale series behind."""
        self.slave_lag.clear()
        self.slave_lag_seconds.clear()
        self.sync_state_set_size.clear()
        self.sync_state_set_member.clear()
        now = self._clock()
        for slave, lag in view.lag_bytes.items():
            self.slave_lag.labels(**self.labels, slave=str(slave)).set(lag)
            if view.lag_seconds is not None:
                seconds = view.lag_seconds.get(slave, 0.0)
            else:
                seconds = self._scraped_lag_seconds(slave, lag, view.master_offset, now)
            self.slave_lag_seconds.labels(**self.labels, slave=str(slave)).set(seconds)
        for gone in set(self._caught_up_at) - set(view.lag_bytes):
            del self._caught_up_at[gone]
        self._seen_ends.append((now, view.master_offset))
        del self._seen_ends[:-LAG_MEMORY]
        if view.sync_state_set is not None:
            self.sync_state_set_size.labels(**self.labels).set(len(view.sync_state_set))
            for bid in view.sync_state_set:
                self.sync_state_set_member.labels(**self.labels, broker_id=str(bid)).set(1)

    def _scraped_lag_seconds(self, slave: int, lag: int, master_offset: int,
                             now: float) -> float:
        """Seconds since ``slave`` last had everything the master had: now when it is at
        the end, else the latest earlier scrape whose master end it has reached by now
        (a slave first seen behind all of them counts from now)."""
        if lag == 0:
            reached: float | None = now
        else:
            offset = master_offset - lag
            reached = next((at for at, end in reversed(self._seen_ends) if offset >= end),
                           None)
        known = self._caught_up_at.get(slave)
        if known is None:
            known = now if reached is None else reached
        elif reached is not None:
            known = max(known, reached)
        self._caught_up_at[slave] = known
        return now - known

    def refresh_consumer_lag(self, lags: dict[tuple[str, str], int]) -> None:
        """``lags`` maps (consumer group, topic) to messages not yet consumed."""
        self.consumer_lag.clear()
        self.group_diff.clear()
        for (group, topic), lag in lags.items():
            self.consumer_lag.labels(**self.labels, group=group, topic=topic).set(lag)
            self.group_diff.labels(**self.labels, group=group, topic=topic).set(lag)
