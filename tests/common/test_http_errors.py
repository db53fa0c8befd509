"""Malformed HTTP requests to a metrics endpoint: no tracebacks in the log, one line
per interval, and the endpoint keeps serving."""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiohttp import web

from mqcluster.common.http_errors import quiet_bad_requests
from mqcluster_testing.procs import free_addr


async def _raw(host: str, port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(data)
    await writer.drain()
    answer = await reader.read(4096)
    writer.close()
    return answer


async def test_garbage_requests_log_one_line_and_the_endpoint_serves(
        caplog: pytest.LogCaptureFixture) -> None:
    app = web.Application()

    async def ok(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app.router.add_get("/metrics", ok)
    quiet_bad_requests()
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, port = free_addr().split(":")
    await web.TCPSite(runner, host, int(port)).start()
    try:
        with caplog.at_level(logging.INFO):
            long_line = b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n"
            for garbage in (b"XYZ / HTTP/1.1\r\n\r\n", long_line,
                            b"\xff\xfe\x00junk\r\n\r\n", b"GET / HTTP/1.1\r\n\r\n"):
                assert b"400" in (await _raw(host, int(port), garbage)).split(b"\r\n")[0]
            answer = await _raw(host, int(port), b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            assert answer.endswith(b"ok")
    finally:
        await runner.cleanup()
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    refused = [r for r in caplog.records if "malformed HTTP request" in r.getMessage()]
    assert len(refused) == 1
