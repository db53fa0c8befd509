"""The proxy's metrics: whether it knows a master to forward to, its epoch, master moves
and failed lookups, served on /metrics and /health."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mqcluster.common.config import ConfigError, build_config
from mqcluster.proxy.config import ProxyConfig
from mqcluster.proxy.master_source import MasterSighting
from mqcluster.proxy.metrics import ProxyHttp, ProxyMetrics
from mqcluster.proxy.tracker import MasterTracker
from mqcluster_testing.procs import free_addr

from .test_tracker import ScriptedSource, tracker


def values(m: ProxyMetrics) -> dict[str, float]:
    text = m.exposition().decode()
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples
            if not s.name.endswith("_created")}


def watched(t: MasterTracker) -> ProxyMetrics:
    m = ProxyMetrics("g", t.role)
    t.listeners.append(m.role_changed)
    t.on_lookup_failure = m.lookup_failed
    return m


async def test_availability_epoch_and_moves_follow_the_tracker() -> None:
    source = ScriptedSource()
    t, _ = tracker(source, {"b1:1": "b1:8081", "b2:1": "b2:8081"})
    m = watched(t)
    await t.poll_once()
    assert values(m)["mqproxy_master_known"] == 0
    source.answer = MasterSighting("b1:1", 1)
    await t.poll_once()
    got = values(m)
    assert (got["mqproxy_master_known"], got["mqproxy_master_epoch"]) == (1, 1)
    assert got["mqproxy_master_changes_total"] == 0  # the first master is no move
    source.answer = MasterSighting(None, 2)  # the master died, none elected yet
    await t.poll_once()
    assert values(m)["mqproxy_master_known"] == 0
    source.answer = MasterSighting("b2:1", 3)
    await t.poll_once()
    got = values(m)
    assert (got["mqproxy_master_known"], got["mqproxy_master_epoch"]) == (1, 3)
    assert got["mqproxy_master_changes_total"] == 1
    source.answer = MasterSighting("b2:1", 4)  # re-elected itself: no move
    await t.poll_once()
    assert values(m)["mqproxy_master_changes_total"] == 1


async def test_failed_lookups_are_counted() -> None:
    source = ScriptedSource()
    source.answer = ConnectionError("no controller answers")
    t, _ = tracker(source, {})
    m = watched(t)
    failed = asyncio.Event()

    def on_failure() -> None:
        m.lookup_failed()
        failed.set()

    t.on_lookup_failure = on_failure
    t.start()
    try:
        await asyncio.wait_for(failed.wait(), 5)
    finally:
        await t.stop()
    assert values(m)["mqproxy_master_lookup_failures_total"] >= 1


async def test_metrics_and_health_are_served() -> None:
    source = ScriptedSource()
    t, _ = tracker(source, {"b1:1": "b1:8081"})
    m = watched(t)
    host, port = free_addr().split(":")
    http = ProxyHttp(m, host, int(port))
    await http.start()
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://{host}:{port}/health") as resp:
                assert (await resp.json())["status"] == "NO_MASTER"
            source.answer = MasterSighting("b1:1", 7)
            await t.poll_once()
            async with session.get(f"http://{host}:{port}/metrics") as resp:
                text = await resp.text()
            async with session.get(f"http://{host}:{port}/health") as resp:
                health = await resp.json()
    finally:
        await http.stop()
    assert 'mqproxy_master_known{broker="g"} 1.0' in text
    assert (health["status"], health["masterGrpc"], health["masterEpoch"]) == ("UP", "b1:8081", 7)


def test_the_metrics_port_is_checked_and_off_by_default() -> None:
    base = {"brokerName": "g", "controllerAddr": "c:9878"}
    assert build_config(ProxyConfig, base).metricsPromExporterPort == 0
    with pytest.raises(ConfigError, match="metricsPromExporterPort"):
        build_config(ProxyConfig, {**base, "metricsPromExporterPort": "70000"})
