"""Real ``mqnamesrv`` / ``mqbroker`` processes on 127.0.0.x with ports chosen at run time."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path

BOOT_TIMEOUT = 60.0


def free_ip() -> str:
    return f"127.0.0.{random.randint(2, 250)}"


def free_port(ip: str) -> int:
    with socket.socket() as s:
        s.bind((ip, 0))
        return int(s.getsockname()[1])


@dataclass
class Proc:
    name: str
    argv: list[str]
    log_path: Path
    proc: asyncio.subprocess.Process | None = None
    boot_line: str = ""

    async def start(self, boot_marker: str) -> None:
        log = self.log_path.open("ab")
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        finally:
            log.close()
        assert self.proc.stdout is not None
        try:
            while True:
                line = await asyncio.wait_for(self.proc.stdout.readline(), BOOT_TIMEOUT)
                if not line:
                    raise RuntimeError(f"{self.name} exited before booting:\n{self.log_tail()}")
                text = line.decode(errors="replace")
                if boot_marker in text:
                    self.boot_line = text.strip()
                    return
        except BaseException:
            await self.kill()
            raise

    def log_tail(self, n: int = 40) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        return ""

    async def kill(self) -> None:
        """SIGKILL and reap."""
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()

    async def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM, wait for a graceful exit (SIGKILL after ``timeout``)."""
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), timeout)
            except TimeoutError:
                await self.kill()
        assert self.proc.returncode is not None
        return self.proc.returncode


@dataclass
class NamesrvProc(Proc):
    addr: str = ""


@dataclass
class BrokerProc(Proc):
    ip: str = ""
    props: dict[str, str] = field(default_factory=dict)

    @property
    def addr(self) -> str:
        return f"{self.ip}:{self.props['listenPort']}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.ip}:{self.props['metricsPromExporterPort']}"

    async def restart(self) -> None:
        await self.start("boot success")


async def start_namesrv(tmp: Path, ip: str | None = None) -> NamesrvProc:
    ip = ip or free_ip()
    port = free_port(ip)
    argv = [
        sys.executable, "-m", "mqcluster.namesrv.main",
        "-p", str(port), "--bindAddress", ip,
    ]  # fmt: skip
    ns = NamesrvProc("mqnamesrv", argv, tmp / f"namesrv-{port}.log", addr=f"{ip}:{port}")
    await ns.start("boot success")
    return ns


def broker_props(tmp: Path, ip: str, **extra: str) -> dict[str, str]:
    props = {
        "brokerClusterName": "TestCluster",
        "brokerName": "broker-a",
        "brokerId": "0",
        "brokerIP1": ip,
        "bindAddress": ip,
        "listenPort": str(free_port(ip)),
        "haListenPort": str(free_port(ip)),
        "grpcServerPort": str(free_port(ip)),
        "metricsPromExporterPort": str(free_port(ip)),
        "storePathRootDir": str(tmp / "store"),
        "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
        "registerNameServerPeriod": "1000",
        "enableProxy": "false",
    }
    props.update(extra)
    return props


async def start_broker(
    tmp: Path, ip: str | None = None, *, args: tuple[str, ...] = (), **extra: str
) -> BrokerProc:
    ip = ip or free_ip()
    props = broker_props(tmp, ip, **extra)
    conf = tmp / f"broker-{props['listenPort']}.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    argv = [sys.executable, "-m", "mqcluster.broker.main", "-c", str(conf), *args]
    broker = BrokerProc("mqbroker", argv, tmp / f"broker-{props['listenPort']}.log", ip=ip)
    broker.props = props
    await broker.start("boot success")
    return broker


@dataclass
class ProxyProc(Proc):
    addr: str = ""


async def start_proxy(tmp: Path, broker_name: str, **props: str) -> ProxyProc:
    """An ``mqproxy`` for ``broker_name`` (pass controllerAddr= or namesrvAddr=)."""
    ip = free_ip()
    port = free_port(ip)
    conf = tmp / f"proxy-{ip}-{port}.conf"
    values = {"brokerName": broker_name, "bindAddress": ip, "grpcServerPort": str(port),
              **props}
    conf.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    argv = [sys.executable, "-m", "mqcluster.proxy.main", "-c", str(conf)]
    proxy = ProxyProc("mqproxy", argv, tmp / f"proxy-{port}.log", addr=f"{ip}:{port}")
    await proxy.start("boot success")
    return proxy
