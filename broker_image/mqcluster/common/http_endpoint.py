"""The HTTP endpoint every server process runs: ``/metrics`` for Prometheus and
``/health`` for probes, on aiohttp. A process supplies the two bodies; a port of 0 takes a
free one (``port`` says which once started). Malformed requests are one rate-limited log
line (``http_errors``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from mqcluster.common.http_errors import quiet_bad_requests


class MetricsEndpoint:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._runner: web.AppRunner | None = None

    def exposition(self) -> bytes:
        """The body of ``/metrics``."""
        raise NotImplementedError

    def health(self) -> tuple[int, Mapping[str, Any]]:
        """The HTTP status and JSON body of ``/health``."""
        raise NotImplementedError

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/health", self._health)
        quiet_bad_requests()
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None)
        if sockets:
            self.port = sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metrics(self, _request: web.Request) -> web.Response:
        return web.Response(body=self.exposition(),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _health(self, _request: web.Request) -> web.Response:
        status, data = self.health()
        return web.Response(status=status, text=json.dumps(data, sort_keys=True),
                            content_type="application/json")
