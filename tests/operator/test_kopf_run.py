"""The production entrypoint: ``kopf run -m mqcluster_operator.handlers`` as a process,
logging in with a kubeconfig that points at the emulator."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import kmock
import kopf
import pytest
import yaml

from mqcluster_operator.k8s import Api
from mqcluster_testing.operator.emulator import Emulator

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def http_ok(url: str) -> bool:
    try:
        async with aiohttp.ClientSession() as session, session.get(url) as resp:
            return resp.status == 200
    except aiohttp.ClientError:
        return False


async def test_kopf_run_with_kubeconfig(tmp_path: Path) -> None:
    async with Emulator() as emulator, kmock.Server(emulator) as server:
        url = str(server.url).rstrip("/")
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "emu", "cluster": {"server": url}}],
            "users": [{"name": "op", "user": {"token": "t"}}],
            "contexts": [{"name": "emu", "context": {"cluster": "emu", "user": "op"}}],
            "current-context": "emu",
        }))
        liveness, metrics = free_port(), free_port()
        env = {**os.environ, "KUBECONFIG": str(kubeconfig),
               "MQCLUSTER_METRICS_PORT": str(metrics), "MQCLUSTER_FOLLOW_INTERVAL_SECONDS": "1"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "kopf", "run", "--module=mqcluster_operator.handlers",
             "--all-namespaces", "--standalone",
             f"--liveness=http://127.0.0.1:{liveness}/healthz"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )
        api = Api(kopf.ConnectionInfo(server=url))
        try:
            await api.create({
                "apiVersion": "mqcluster.io/v1alpha1", "kind": "Controller",
                "metadata": {"name": "mqc", "namespace": "mq"}, "spec": {},
            })
            deadline = time.monotonic() + 60
            while emulator.live("apps/v1/statefulsets", "mq", "mqc") is None:
                assert proc.poll() is None, "kopf exited"
                assert time.monotonic() < deadline, "no StatefulSet from the kopf process"
                await asyncio.sleep(0.2)
            while not await http_ok(f"http://127.0.0.1:{liveness}/healthz"):
                assert time.monotonic() < deadline, "liveness endpoint never answered"
                await asyncio.sleep(0.2)
            assert await http_ok(f"http://127.0.0.1:{metrics}/metrics")
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
            await api.close()
