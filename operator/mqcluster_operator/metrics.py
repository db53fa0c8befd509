"""Prometheus metrics of the operator (served when MQCLUSTER_METRICS_PORT is set)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

REGISTRY = CollectorRegistry()

MASTER_CHANGES = Counter(
    "mqcluster_operator_master_changes_total",
    "Master changes seen by the election-following daemon.",
    ["namespace", "brokergroup"],
    registry=REGISTRY,
)
RELABEL_SECONDS = Histogram(
    "mqcluster_operator_relabel_seconds",
    "From learning of a new master to its pod labelled role=master.",
    registry=REGISTRY,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
PROBE_FAILURES = Counter(
    "mqcluster_operator_probe_failures_total",
    "Failed attempts to learn the election state.",
    ["namespace", "name"],
    registry=REGISTRY,
)
APPLIED = Counter(
    "mqcluster_operator_objects_applied_total",
    "Objects created or patched by reconciliation.",
    ["kind", "result"],
    registry=REGISTRY,
)


RECONCILES = Counter(
    "mqcluster_operator_reconciles_total",
    "Reconciles by resource kind and result (ok or error).",
    ["resource", "result"],
    registry=REGISTRY,
)
RECONCILE_SECONDS = Histogram(
    "mqcluster_operator_reconcile_seconds",
    "Duration of one reconcile, by resource kind.",
    ["resource"],
    registry=REGISTRY,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)


FOLLOW_SECONDS = Histogram(
    "mqcluster_operator_follow_seconds",
    "Duration of one election-following pass over a resource (probe answer to pods "
    "relabelled and status written).",
    ["resource"],
    registry=REGISTRY,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
API_REQUESTS = Counter(
    "mqcluster_operator_api_requests_total",
    "Requests to the Kubernetes API server, by HTTP method.",
    ["method"],
    registry=REGISTRY,
)
API_ERRORS = Counter(
    "mqcluster_operator_api_errors_total",
    "Failed requests to the Kubernetes API server, by HTTP method and status code "
    "(\"unreachable\": no answer at all).",
    ["method", "code"],
    registry=REGISTRY,
)
CONDITION = Gauge(
    "mqcluster_operator_resource_condition",
    "Conditions the operator last wrote, per resource: 1 True, 0 False, -1 Unknown.",
    ["namespace", "kind", "name", "type"],
    registry=REGISTRY,
)
CONDITION_VALUES = {"True": 1, "False": 0}


def record_conditions(namespace: str, kind: str, name: str,
                      conditions: Iterable[Mapping[str, Any]]) -> None:
    """Set the condition gauges of one resource from the conditions being written."""
    for cond in conditions:
        type_ = cond.get("type")
        if isinstance(type_, str) and type_:
            CONDITION.labels(namespace, kind, name, type_).set(
                CONDITION_VALUES.get(str(cond.get("status")), -1))


@contextmanager
def follow_timer(resource: str) -> Iterator[None]:
    started = time.monotonic()
    try:
        yield
    finally:
        FOLLOW_SECONDS.labels(resource).observe(time.monotonic() - started)


@contextmanager
def reconcile_timer(resource: str) -> Iterator[None]:
    """Count the reconcile enclosed and record how long it took."""
    started = time.monotonic()
    result = "error"
    try:
        yield
        result = "ok"
    finally:
        RECONCILES.labels(resource, result).inc()
        RECONCILE_SECONDS.labels(resource).observe(time.monotonic() - started)


def serve(port: int) -> None:
    if port > 0:
        start_http_server(port, registry=REGISTRY)
