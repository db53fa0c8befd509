"""HTTP endpoint for probes and Prometheus: ``/metrics``, ``/health``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import generate_latest

from mqcluster.broker.config import BrokerRole
from mqcluster.broker.context import BrokerContext
from mqcluster.common.http_endpoint import MetricsEndpoint
from mqcluster.store.retention import disk_usage_ratio


def refresh_gauges(ctx: BrokerContext) -> None:
    """Gauges read from the store and the replication state at scrape time."""
    m, store = ctx.metrics, ctx.store
    m.commitlog_max_offset.labels(**m.labels).set(store.commitlog_max_offset)
    m.commitlog_min_offset.labels(**m.labels).set(store.commitlog_min_offset)
    m.dispatch_lag.labels(**m.labels).set(store.dispatch_behind_bytes)
    m.topics.labels(**m.labels).set(len(store.topics.table))
    role = ctx.role
    m.refresh_role(role.broker_id, role.is_master, role.master_epoch,
                   ctx.config.minInSyncReplicas, store.confirm_offset)
    m.refresh_replication(m.replication())
    m.disk_ratio.labels(**m.labels).set(disk_usage_ratio(ctx.config.storePathRootDir))
    lags: dict[tuple[str, str], int] = {}
    for key, queues in store.offsets.table.items():
        topic, _, group = key.partition("@")
        lag = sum(max(0, store.max_offset(topic, qid) - off) for qid, off in queues.items())
        lags[(group, topic)] = lags.get((group, topic), 0) + lag
    m.refresh_consumer_lag(lags)


class HttpEndpoint(MetricsEndpoint):
    def __init__(self, ctx: BrokerContext, host: str, port: int) -> None:
        super().__init__(host, port)
        self.ctx = ctx

    def exposition(self) -> bytes:
        if self.ctx.serving:
            refresh_gauges(self.ctx)
        return generate_latest(self.ctx.metrics.registry)

    def health(self) -> tuple[int, Mapping[str, Any]]:
        cfg = self.ctx.config
        role = self.ctx.role
        # The role now, not the configured one: controller and DLedger modes move it.
        if not role.is_master:
            broker_role = BrokerRole.SLAVE
        elif cfg.brokerRole is BrokerRole.SLAVE:
            broker_role = BrokerRole.ASYNC_MASTER
        else:
            broker_role = cfg.brokerRole
        data = {
            "status": "UP" if self.ctx.serving else "DOWN",
            "brokerName": cfg.brokerName,
            "brokerId": role.broker_id,
            "brokerRole": broker_role.value,
            "masterEpoch": role.master_epoch,
            "brokerAddr": self.ctx.addresses.broker,
        }
        return (200 if self.ctx.serving else 503), data
