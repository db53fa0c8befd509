"""``BrokerMetrics``: what a burst of sends adds to the exported counters."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mqcluster.broker.metrics import BrokerMetrics


def samples(metrics: BrokerMetrics) -> dict[tuple[str, str], float]:
    text = generate_latest(metrics.registry).decode()
    return {(s.name, s.labels.get("topic", "")): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_requests_stored_together_count_every_message_and_each_request_latency() -> None:
    metrics = BrokerMetrics("c", "b")
    metrics.record_puts({"A": (3, 300), "B": (1, 10)}, requests=3, seconds=0.002)
    metrics.record_put("A", 2, 20, 0.001)
    got = samples(metrics)
    assert got[("rocketmq_messages_in_total", "A")] == 5
    assert got[("rocketmq_throughput_in_total", "A")] == 320
    assert got[("rocketmq_messages_in_total", "B")] == 1
    assert got[("rocketmq_rpc_latency_put_seconds_count", "")] == 4
    assert abs(got[("rocketmq_rpc_latency_put_seconds_sum", "")] - 0.007) < 1e-9
