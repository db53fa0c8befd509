"""The emulator refuses what the real API server refuses in query parameters: a
non-integer ``timeoutSeconds`` (kopf's float watch timeout passed the emulator while a
real API server answered every watch with 400)."""

from __future__ import annotations

import aiohttp
import kmock
import pytest

from mqcluster_testing.operator.emulator import Emulator


@pytest.mark.parametrize(("query", "status"), [
    ("timeoutSeconds=300.0", 400), ("timeoutSeconds=300", 200), ("limit=1.5", 400)])
async def test_integer_query_parameters(query: str, status: int) -> None:
    async with Emulator() as emulator, kmock.Server(emulator) as server:
        url = f"{str(server.url).rstrip('/')}/api/v1/namespaces/ns/pods?{query}"
        async with aiohttp.ClientSession() as session, session.get(url) as resp:
            assert resp.status == status, await resp.text()
            if status == 400:
                assert "strconv.ParseInt" in await resp.text()
