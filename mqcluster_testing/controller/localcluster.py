"""N ``mqcontroller`` processes on loopback, for tests and benchmarks.

    cluster = LocalControllerCluster(["127.0.0.5:4001", ...], workdir)
    try:
        cluster.start_all()
        active = await cluster.wait_active()
        cluster.kill("n0")            # SIGKILL
        cluster.start("n0")           # same store: recovers from snapshot + log
    finally:
        cluster.kill_all()

Every process writes its output to ``<workdir>/<id>.<n>.log``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from mqcluster.client.controller import ControllerClient, ControllerMetadata
from mqcluster.wire.rpc import RpcError


class LocalControllerCluster:
    def __init__(
        self,
        addrs: list[str],
        workdir: str | Path,
        *,
        metrics_ports: list[int] | None = None,
        options: dict[str, str] | None = None,
    ) -> None:
        self.ids = [f"n{i}" for i in range(len(addrs))]
        self.addrs = dict(zip(self.ids, addrs, strict=True))
        self.workdir = Path(workdir)
        self.metrics_ports = dict(zip(self.ids, metrics_ports or [], strict=False))
        self.options = dict(options or {})
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._all: list[subprocess.Popen[bytes]] = []
        self._starts = 0

    @property
    def peers(self) -> str:
        return ";".join(f"{i}-{a}" for i, a in self.addrs.items())

    @property
    def controller_addr(self) -> str:
        """The brokers' ``controllerAddr``."""
        return ";".join(self.addrs.values())

    def argv(self, node: str) -> list[str]:
        opts = {
            "controllerDLegerGroup": "test-group",
            "controllerDLegerPeers": self.peers,
            "controllerDLegerSelfId": node,
            "controllerStorePath": str(self.workdir / node / "store"),
            **self.options,
        }
        if node in self.metrics_ports:
            opts["metricsPromExporterPort"] = str(self.metrics_ports[node])
            opts["metricsPromExporterHost"] = self.addrs[node].rpartition(":")[0]
        argv = [sys.executable, "-m", "mqcluster.controller.main"]
        for k, v in opts.items():
            argv += ["-o", f"{k}={v}"]
        return argv

    def start(self, node: str) -> subprocess.Popen[bytes]:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._starts += 1
        log_path = self.workdir / f"{node}.{self._starts}.log"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with open(log_path, "wb") as out:
            p = subprocess.Popen(
                self.argv(node), stdout=out, stderr=subprocess.STDOUT, env=env,
                stdin=subprocess.DEVNULL,
            )
        self.procs[node] = p
        self._all.append(p)
        return p

    def start_all(self) -> None:
        for node in self.ids:
            self.start(node)

    def kill(self, node: str) -> None:
        p = self.procs.pop(node, None)
        if p is not None:
            _kill(p)

    def kill_all(self) -> None:
        for p in self._all:
            _kill(p)
        self.procs.clear()

    def node_of(self, addr: str) -> str:
        for node, a in self.addrs.items():
            if a == addr:
                return node
        raise KeyError(addr)

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}"
            for p in sorted(self.workdir.glob("*.log"))
        )

    async def metadata(self, node: str, timeout: float = 1.0) -> ControllerMetadata | None:
        client = ControllerClient([self.addrs[node]], timeout=timeout)
        try:
            return await client.get_metadata(self.addrs[node])
        except (RpcError, ValueError, OSError):
            return None
        finally:
            await client.close()

    async def wait_active(
        self, timeout: float = 10.0, *, exclude: set[str] | None = None
    ) -> ControllerMetadata:
        """Poll the running controllers until one answers as active; its metadata."""
        deadline = time.monotonic() + timeout
        while True:
            for node in list(self.procs):
                if exclude and node in exclude:
                    continue
                meta = await self.metadata(node)
                if meta is not None and meta.is_leader:
                    return meta
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no active controller within {timeout} s\n{self.logs()}")
            await asyncio.sleep(0.05)

    def health(self, node: str) -> dict[str, Any]:
        port = self.metrics_ports[node]
        host = self.addrs[node].rpartition(":")[0]
        with urllib.request.urlopen(f"http://{host}:{port}/health", timeout=2) as resp:
            data: dict[str, Any] = json.loads(resp.read())
        return data


def _kill(p: subprocess.Popen[bytes]) -> None:
    if p.poll() is None:
        try:
            p.send_signal(signal.SIGCONT)
            p.send_signal(signal.SIGKILL)
        except ProcessLookupError:
            pass
    p.wait()
