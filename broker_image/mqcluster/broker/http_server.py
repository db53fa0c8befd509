"""HTTP endpoint for probes and Prometheus: ``/metrics``, ``/health``."""

from __future__ import annotations

import json

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from mqcluster.broker.config import BrokerRole
from mqcluster.broker.context import BrokerContext
from mqcluster.common.http_errors import quiet_bad_requests
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


class HttpEndpoint:
    def __init__(self, ctx: BrokerContext, host: str, port: int) -> None:
        self.ctx = ctx
        self.host, self.port = host, port
        self._runner: web.AppRunner | None = None

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/health", self.health)
        return app

    async def start(self) -> None:
        quiet_bad_requests()
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def metrics(self, request: web.Request) -> web.Response:
        if self.ctx.serving:
            refresh_gauges(self.ctx)
        body = generate_latest(self.ctx.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def health(self, request: web.Request) -> web.Response:
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
        return web.Response(
            status=200 if self.ctx.serving else 503,
            text=json.dumps(data),
            content_type="application/json",
        )
