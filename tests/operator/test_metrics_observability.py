"""The operator's API request and error counters, its per-resource condition gauges and
the follow timer, through the API client against a local HTTP server."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import kopf
import pytest
from aiohttp import web

from mqcluster_operator import conditions, metrics, names
from mqcluster_operator.k8s import Api, ApiError, Ref

GROUP = Ref(names.API_VERSION, "BrokerGroup", "obs", "bg")


def sample(name: str, labels: dict[str, str]) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
async def server() -> AsyncIterator[str]:
    async def status(request: web.Request) -> web.Response:
        if request.match_info["name"] == "refused":
            return web.json_response({"kind": "Status", "reason": "Forbidden"}, status=403)
        return web.json_response(await request.json())

    app = web.Application()
    app.router.add_route("PATCH", f"/apis/{names.API_VERSION}/namespaces/obs/"
                                  "brokergroups/{name}/status", status)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_written_conditions_become_gauges_and_a_refused_write_changes_none(
        server: str) -> None:
    api = Api(kopf.ConnectionInfo(server=server))
    conds = [{"type": "MasterElected", "status": "True"},
             {"type": "Degraded", "status": "False"},
             {"type": "Ready", "status": "Unknown"}]  # not the follower's: not written
    labels = {"namespace": "obs", "kind": "BrokerGroup", "name": "bg"}
    before = sample("mqcluster_operator_api_requests_total", {"method": "PATCH"})
    try:
        await api.write_status(GROUP, {"conditions": conds}, conditions.FOLLOWER)
        got = {t: metrics.REGISTRY.get_sample_value(
            "mqcluster_operator_resource_condition", {**labels, "type": t})
            for t in ("MasterElected", "Degraded", "Ready")}
        assert got == {"MasterElected": 1.0, "Degraded": 0.0, "Ready": None}
        await api.write_status(GROUP, {"conditions": [{"type": "Ready", "status": "Unknown"}]},
                               conditions.RECONCILER)
        assert sample("mqcluster_operator_resource_condition", {**labels, "type": "Ready"}) == -1
        refused = Ref(GROUP.api_version, GROUP.kind, "obs", "refused")
        with pytest.raises(ApiError):
            await api.write_status(refused, {"conditions": conds}, conditions.FOLLOWER)
        assert metrics.REGISTRY.get_sample_value(
            "mqcluster_operator_resource_condition",
            {**labels, "name": "refused", "type": "MasterElected"}) is None
        assert sample("mqcluster_operator_api_errors_total",
                      {"method": "PATCH", "code": "403"}) >= 1
        assert sample("mqcluster_operator_api_requests_total",
                      {"method": "PATCH"}) == before + 3
    finally:
        await api.close()


async def test_an_unreachable_api_server_is_counted_as_such() -> None:
    api = Api(kopf.ConnectionInfo(server=f"http://127.0.0.1:{closed_port()}"))
    labels = {"method": "GET", "code": "unreachable"}
    before = sample("mqcluster_operator_api_errors_total", labels)
    try:
        with pytest.raises(OSError):
            await api.get(Ref("v1", "Pod", "ns", "p-0"))
    finally:
        await api.close()
    assert sample("mqcluster_operator_api_errors_total", labels) == before + 1


def test_follow_timer_records_every_pass_even_a_failed_one() -> None:
    labels = {"resource": "Probe"}
    before = sample("mqcluster_operator_follow_seconds_count", labels)
    with metrics.follow_timer("Probe"):
        pass
    with pytest.raises(RuntimeError), metrics.follow_timer("Probe"):
        raise RuntimeError("boom")
    assert sample("mqcluster_operator_follow_seconds_count", labels) == before + 2
