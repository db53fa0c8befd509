"""Prometheus metrics of one broker, in a per-process CollectorRegistry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

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


class BrokerMetrics:
    """Counters and gauges the broker updates; ``registry`` is what /metrics exports."""

    def __init__(self, cluster: str, broker: str, registry: CollectorRegistry | None = None):
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
