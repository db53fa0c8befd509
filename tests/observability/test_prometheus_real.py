"""A real Prometheus (Debian's package) scrapes a local cluster: the embedded controllers
and a controller-mode group of 3 (``examples/``, as ``mqcluster local up`` runs them), an
``mqproxy`` in front of the group and the operator's exporter. The official client sends
and consumes and the master is SIGKILLed; then every dashboard query must return data,
every alert expression must evaluate, and every metric either names must have series: a
misspelt name fails. Last, the whole group is killed and MQClusterNoMaster goes pending."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import time
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml
from aiohttp import web
from prometheus_client import start_http_server

from mqcluster.client.broker_api import BrokerApi
from mqcluster.client.errors import BrokerError
from mqcluster.client.message import Message
from mqcluster_operator import conditions, metrics, names
from mqcluster_operator.k8s import Api, Ref
from mqcluster_operator.local import demo
from mqcluster_operator.local.cli import load, random_prefix
from mqcluster_operator.local.plan import plan, read_manifests
from mqcluster_operator.local.runner import LocalCluster, Running
from mqcluster_testing.broker.procs import ProxyProc, start_proxy
from mqcluster_testing.procs import Procs, free_addr, procs  # noqa: F401

from .promql import ALERTS, Query, alert_queries, dashboard_queries, metric_names

PROMETHEUS = shutil.which("prometheus")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(PROMETHEUS is None,
                       reason="prometheus not installed (apt-get install prometheus)"),
]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MANIFESTS = ["controller-embedded.yaml", "brokergroup-controller.yaml"]
SCRAPE = "1s"
RATE = "10s"


def say(message: str) -> None:
    print(message, flush=True)


class Prometheus:
    def __init__(self, url: str) -> None:
        self.url = url

    def get(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=10) as resp:
            body = json.loads(resp.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        try:
            data = self.get("/api/v1/query", query=expr)
        except urllib.error.HTTPError as exc:  # a bad expression: 400 with the reason
            raise AssertionError(f"{expr}: {exc.read().decode()}") from None
        result: list[dict[str, Any]] = data["result"]
        return result


async def until(check: Any, what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.25)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    local = LocalCluster(tmp_path / "state")
    manifests = read_manifests(load([str(EXAMPLES / m) for m in MANIFESTS]))
    try:
        local.up(plan(manifests, random_prefix(), tmp_path / "state" / "data"), say)
        yield local
    finally:
        local.down()


@pytest.fixture
async def proxy(cluster: LocalCluster, tmp_path: Path) -> AsyncIterator[str]:
    """An mqproxy for broker-a; yields its metrics address."""
    broker = next(p for p in cluster.processes if p.group == "broker-a")
    metrics_at = free_addr()
    host, port = metrics_at.split(":")
    proc: ProxyProc = await start_proxy(tmp_path, "broker-a",
                                        controllerAddr=broker.props["controllerAddr"],
                                        metricsPromExporterHost=host,
                                        metricsPromExporterPort=port)
    try:
        yield metrics_at
    finally:
        await proc.kill()


@pytest.fixture
async def operator_exporter() -> AsyncIterator[str]:
    """The operator's registry on a loopback port, after the calls that feed it: API
    requests answered, refused and unanswered, conditions written, reconciles and
    following passes (no Kubernetes here to run the operator itself against)."""
    host, port = free_addr().split(":")
    server, thread = start_http_server(int(port), addr=host, registry=metrics.REGISTRY)

    async def status(request: web.Request) -> web.Response:
        return web.json_response(await request.json())

    app = web.Application()
    app.router.add_route("PATCH", f"/apis/{names.API_VERSION}/namespaces/local/brokergroups/"
                                  "{name}/status", status)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    api = Api(kopf.ConnectionInfo(server=url))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    gone = Api(kopf.ConnectionInfo(server=f"http://127.0.0.1:{closed}"))
    try:
        group = Ref(names.API_VERSION, "BrokerGroup", "local", "broker-a")
        with metrics.reconcile_timer("BrokerGroup"), metrics.follow_timer("BrokerGroup"):
            await api.write_status(group, {"conditions": [
                {"type": "MasterElected", "status": "True"}]}, conditions.FOLLOWER)
        assert await api.get(Ref("v1", "Pod", "local", "missing")) is None  # a 404
        with pytest.raises(OSError):
            await gone.get(Ref("v1", "Pod", "local", "p"))
        metrics.RELABEL_SECONDS.observe(0.01)
        metrics.MASTER_CHANGES.labels("local", "broker-a").inc()
        metrics.PROBE_FAILURES.labels("local", "broker-a").inc()
        metrics.APPLIED.labels("StatefulSet", "applied").inc()
        yield f"{host}:{port}"
    finally:
        await api.close()
        await gone.close()
        await runner.cleanup()
        server.shutdown()
        thread.join(5)


def metrics_addr(p: Running) -> str:
    return f"{p.props['metricsPromExporterHost']}:{p.props['metricsPromExporterPort']}"


def start_prometheus(procs: Procs, tmp: Path, targets: list[str]) -> Prometheus:  # noqa: F811
    listen = free_addr()
    config = {
        "global": {"scrape_interval": SCRAPE, "evaluation_interval": SCRAPE},
        "rule_files": [str(ALERTS)],
        "scrape_configs": [{"job_name": "mqcluster",
                            "static_configs": [{"targets": targets}]}],
    }
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    assert PROMETHEUS is not None
    procs.spawn([PROMETHEUS, f"--config.file={tmp / 'prometheus.yml'}",
                 f"--storage.tsdb.path={tmp / 'tsdb'}", f"--web.listen-address={listen}",
                 "--log.level=warn"], name="prometheus")
    return Prometheus(f"http://{listen}")


def check_all(prom: Prometheus, queries: list[Query], need_data: bool) -> list[str]:
    problems = []
    for q in queries:
        if need_data and not prom.query(q.expr):
            problems.append(f"{q.where}: no data for {q.expr}")
        elif not need_data:
            prom.query(q.expr)  # must at least evaluate
        for name in sorted(metric_names(q.expr)):
            if not prom.query(f"count({name})"):
                problems.append(f"{q.where}: no series named {name}")
    return problems


async def test_dashboards_and_alerts_against_a_real_prometheus(
        cluster: LocalCluster, proxy: str, operator_exporter: str, procs: Procs,  # noqa: F811
        tmp_path: Path) -> None:
    targets = [metrics_addr(p) for p in cluster.processes] + [proxy, operator_exporter]
    prom = start_prometheus(procs, tmp_path, targets)
    await until(lambda: _all_up(prom, len(targets)), "every target scraped", 60)
    group = "broker-a"
    replicas = [p for p in cluster.processes if p.group == group]
    before = await demo.wait_state(replicas, lambda s: s.master is not None
                                   and len(s.in_sync) == 3, "all in sync", say)
    master = next(p for p in replicas if p.name == before.master)

    # sends, a master killed, a new one elected, every message consumed (DemoGroup)
    assert await demo.failover(cluster, group, say)
    # one refused send (a slave takes none): the write errors panel has a series
    after = await demo.wait_state(replicas, lambda s: s.master not in (None, master.name),
                                  "the new master", say)
    slave = next(p for p in replicas if p.name not in (master.name, after.master))
    api = BrokerApi()
    try:
        with pytest.raises(BrokerError):
            await api.send(slave.addr, f"Demo-{group}",
                           Message(f"Demo-{group}", b"x").to_wire(), 0)
    finally:
        await api.close()

    # Prometheus saw the failover: the master role moved, the epoch went up
    new_master = next(p for p in replicas if p.name == after.master)
    await until(lambda: [r["metric"]["instance"] for r in prom.query(
        f'rocketmq_broker_is_master{{broker="{group}"}} == 1')] == [metrics_addr(new_master)],
        "the new master scraped, and only it")
    assert after.epoch > before.epoch
    await until(lambda: prom.query(
        f'max(rocketmq_broker_master_epoch{{broker="{group}"}}) == {after.epoch}'),
        "the new epoch scraped")
    assert prom.query(f'up{{instance="{metrics_addr(master)}"}} == 0')
    # the proxy moved to the new master
    await until(lambda: prom.query(f'mqproxy_master_changes_total{{broker="{group}"}} == 1'),
                "the proxy's master move scraped")
    # the consumer group's offsets reach the brokers and the error count the scrape
    await until(lambda: prom.query(f'rocketmq_group_diff{{broker="{group}"}}'),
                "consumer lag scraped")
    await until(lambda: prom.query("rocketmq_put_errors_total"), "put errors scraped")
    await asyncio.sleep(12)  # a rate() needs samples 10s apart

    cluster_name = master.props["brokerClusterName"]
    dashboards = dashboard_queries({"cluster": cluster_name, "broker": group}, RATE)
    assert len(dashboards) >= 40
    problems = check_all(prom, dashboards, need_data=True)
    problems += check_all(prom, alert_queries(), need_data=False)
    assert problems == [], "\n".join(problems)
    # and a misspelt name or a series that is not there would have been caught
    assert check_all(prom, [Query("typo", 'rate(rocketmq_mesages_in_total[10s])')], True) == [
        "typo: no data for rate(rocketmq_mesages_in_total[10s])",
        "typo: no series named rocketmq_mesages_in_total"]
    assert check_all(prom, [Query("typo", "max(rocketmq_broker_is_mastr) == 0")], False) == [
        "typo: no series named rocketmq_broker_is_mastr"]
    say(f"{len(dashboards)} dashboard queries returned data; {len(alert_queries())} alert "
        f"expressions evaluated")

    # The rest of the group killed: no replica is left to say it is master, the controllers
    # elect nobody and clear the master, and Prometheus' MQClusterNoMaster goes pending.
    for p in replicas:
        cluster.kill(p.name)
    await until(lambda: prom.query(
        f'ALERTS{{alertname="MQClusterNoMaster", broker="{group}"}}'), "MQClusterNoMaster", 60)

    rules = prom.get("/api/v1/rules")["groups"]
    alerting = [r for g in rules for r in g["rules"] if r["type"] == "alerting"]
    assert len(alerting) == len(alert_queries())
    assert all(r["health"] == "ok" for r in alerting), alerting


def _all_up(prom: Prometheus, count: int) -> bool:
    try:
        active = prom.get("/api/v1/targets")["activeTargets"]
    except OSError:
        return False
    return len(active) == count and all(t["health"] == "up" for t in active)
