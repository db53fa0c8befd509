"""The proxy's /metrics and /health, served: per group, as the table says."""

from __future__ import annotations

import aiohttp
import pytest

from mqcluster.common.config import ConfigError, build_config
from mqcluster.proxy.config import ProxyConfig
from mqcluster.proxy.groups import GroupTable
from mqcluster.proxy.metrics import ProxyHttp, ProxyMetrics
from mqcluster_testing.procs import free_addr


async def test_metrics_and_health_are_served() -> None:
    table = GroupTable(failures_to_down=1)
    draining = False
    host, port = free_addr().split(":")
    http = ProxyHttp(ProxyMetrics(table), host, int(port), lambda: draining)
    await http.start()
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://{host}:{port}/health") as resp:
                assert (resp.status, (await resp.json())["status"]) == (503, "NO_GROUP")
            table.sighted("a", "a0:10911", "a0:8081", 7)
            table.sighted("b", "b0:10911", "b0:8081", 2)
            table.failed("b", "b0:8081", "probe: DEADLINE_EXCEEDED")
            async with session.get(f"http://{host}:{port}/metrics") as resp:
                text = await resp.text()
            async with session.get(f"http://{host}:{port}/health") as resp:
                status, health = resp.status, await resp.json()
            draining = True
            async with session.get(f"http://{host}:{port}/health") as resp:
                assert resp.status == 503
    finally:
        await http.stop()
    assert 'mqproxy_group_up{broker="a"} 1.0' in text
    assert 'mqproxy_group_up{broker="b"} 0.0' in text
    assert (status, health["status"]) == (200, "DEGRADED")
    assert health["groups"]["b"]["status"] == "DOWN"
    assert health["groups"]["a"]["masterEpoch"] == 7


def test_the_metrics_port_is_checked_and_off_by_default() -> None:
    base = {"controllerAddr": "c:9878"}
    assert build_config(ProxyConfig, base).metricsPromExporterPort == 0
    with pytest.raises(ConfigError, match="metricsPromExporterPort"):
        build_config(ProxyConfig, {**base, "metricsPromExporterPort": "70000"})
