"""RemotingControllerProbe and HealthProbe against real processes / endpoints."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp import web

from mqcluster_operator.follow.election_plan import ProbeError
from mqcluster_operator.follow.election_probes import HealthProbe, RemotingControllerProbe

pytestmark = pytest.mark.timeout(60)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    conf = tmp_path / "controller.conf"
    conf.write_text(
        f"listenPort={port}\ncontrollerDLegerGroup=g\n"
        f"controllerDLegerPeers=n0-127.0.0.1:{port}\ncontrollerDLegerSelfId=n0\n"
        f"controllerStorePath={tmp_path / 'store'}\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "mqcluster.controller.main", "-c", str(conf)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        yield f"127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(10)


async def test_metadata_and_election_from_a_real_controller(controller: str) -> None:
    probe = RemotingControllerProbe([controller], timeout=1.0)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                meta = await probe.metadata()
                if meta.active:
                    break
            except ProbeError:
                pass
            assert time.monotonic() < deadline, "controller never became active"
            await asyncio.sleep(0.2)
        assert meta.active == controller and meta.term and meta.term >= 1
        assert meta.members == (controller,)
        election = await probe.election("DefaultCluster", "no-such-group")
        assert election.master_address is None
        assert election.active_controller == controller
    finally:
        await probe.close()


async def test_unreachable_controller_is_a_probe_error() -> None:
    probe = RemotingControllerProbe([f"127.0.0.1:{free_port()}"], timeout=0.5)
    try:
        with pytest.raises(ProbeError):
            await probe.metadata()
        with pytest.raises(ProbeError):
            await probe.election("c", "b")
    finally:
        await probe.close()


@pytest_asyncio.fixture
async def health_endpoints() -> AsyncIterator[list[tuple[str, str]]]:
    roles = {0: "SLAVE", 1: "SYNC_MASTER", 2: None}
    runners = []
    targets = []
    for ordinal, role in roles.items():
        app = web.Application()

        async def health(request: web.Request, role: str | None = role,
                         ordinal: int = ordinal) -> web.Response:
            if role is None:
                return web.json_response({"status": "DOWN"}, status=503)
            return web.json_response({"status": "UP", "brokerId": ordinal, "brokerRole": role})

        app.router.add_get("/health", health)
        runner = web.AppRunner(app)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        runners.append(runner)
        targets.append((f"bg-{ordinal}.bg-headless.mq.svc:10911",
                        f"http://127.0.0.1:{port}/health"))
    yield targets
    for runner in runners:
        await runner.cleanup()


async def test_health_probe_finds_the_master(health_endpoints: list[tuple[str, str]]) -> None:
    probe = HealthProbe(health_endpoints)
    try:
        election = await probe.election("c", "bg")
        assert election.master_address == "bg-1.bg-headless.mq.svc:10911"
        assert [r.alive for r in election.replicas] == [True, True, False]
        with pytest.raises(ProbeError):
            await probe.switchover("c", "bg", 0)
    finally:
        await probe.close()
