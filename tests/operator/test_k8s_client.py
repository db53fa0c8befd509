"""The API client against an HTTP server that answers what real API servers and the
proxies in front of them answer: errors with and without a JSON Status body."""

from __future__ import annotations

from collections.abc import AsyncIterator

import kopf
import pytest
from aiohttp import web

from mqcluster_operator.k8s import Api, ApiError, Ref

POD = Ref("v1", "Pod", "ns", "p-0")


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[web.Request]]]:
    seen: list[web.Request] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request)
        name = request.match_info["name"]
        if name == "throttled":
            return web.json_response(
                {"kind": "Status", "reason": "TooManyRequests", "message": "slow down"},
                status=429, headers={"Retry-After": "3"})
        if name == "proxy-error":
            return web.Response(status=502, text="<html>Bad Gateway</html>",
                                content_type="text/html")
        if name == "missing":
            return web.json_response({"kind": "Status", "reason": "NotFound"}, status=404)
        return web.json_response({"apiVersion": "v1", "kind": "Pod",
                                  "metadata": {"name": name, "namespace": "ns"}})

    app = web.Application()
    app.router.add_route("*", "/api/v1/namespaces/ns/pods/{name}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        await runner.cleanup()


async def test_reads_send_the_token_and_return_plain_dicts(
        server: tuple[str, list[web.Request]]) -> None:
    url, seen = server
    api = Api(kopf.ConnectionInfo(server=url, token="secret"))
    try:
        pod = await api.get(POD)
        assert pod == {"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "p-0", "namespace": "ns"}}
        assert seen[0].headers["Authorization"] == "Bearer secret"
        assert await api.get(Ref("v1", "Pod", "ns", "missing")) is None
    finally:
        await api.close()


async def test_errors_carry_status_reason_and_retry_after_whatever_the_body(
        server: tuple[str, list[web.Request]]) -> None:
    url, _ = server
    api = Api(kopf.ConnectionInfo(server=url))
    try:
        with pytest.raises(ApiError) as throttled:
            await api.patch(Ref("v1", "Pod", "ns", "throttled"), {"metadata": {}})
        assert (throttled.value.status, throttled.value.reason) == (429, "TooManyRequests")
        assert throttled.value.retry_after == 3.0 and throttled.value.transient
        with pytest.raises(ApiError) as bad_gateway:
            await api.get(Ref("v1", "Pod", "ns", "proxy-error"))
        assert bad_gateway.value.status == 502
        assert "Bad Gateway" in bad_gateway.value.message
    finally:
        await api.close()


async def test_a_relogin_replaces_the_client_and_closes_the_old_one(
        server: tuple[str, list[web.Request]]) -> None:
    url, seen = server
    api = Api(kopf.ConnectionInfo(server=url, token="old"))
    try:
        await api.get(POD)
        api.configure(kopf.ConnectionInfo(server=url, token="new"))
        await api.get(POD)
        assert [r.headers["Authorization"] for r in seen] == ["Bearer old", "Bearer new"]
        assert api._stale == []
    finally:
        await api.close()
