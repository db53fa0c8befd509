"""A cluster of several controller-mode groups as processes, and cluster-wide proxies.

3 ``mqcontroller``, one ``mqnamesrv``, ``groups`` broker groups of ``replicas`` each,
and ``mqproxy`` processes serving all of them (no brokerName). Brokers are SIGKILLed,
SIGSTOPped and woken by (group, index)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

from mqcluster.client.controller import ControllerClient, ReplicaInfo
from mqcluster_testing.broker.procs import (
    BrokerProc,
    NamesrvProc,
    ProxyProc,
    free_ip,
    free_port,
    start_broker,
)
from mqcluster_testing.control_plane import start_control_plane, stop_control_plane
from mqcluster_testing.controller.localcluster import LocalControllerCluster
from mqcluster_testing.procs import free_addr

CLUSTER = "ProxyCluster"


class GroupsCluster:
    def __init__(self, tmp: Path, groups: int = 2, replicas: int = 2,
                 controller_options: dict[str, str] | None = None,
                 **broker_props: str) -> None:
        self.tmp = tmp
        self.names = [f"broker-{chr(ord('a') + i)}" for i in range(groups)]
        self.replicas = replicas
        self.broker_props = broker_props
        self.controllers = LocalControllerCluster([free_addr() for _ in range(3)],
                                                  tmp / "controllers",
                                                  options=controller_options or {})
        self.namesrv: NamesrvProc | None = None
        self.brokers: dict[str, list[BrokerProc]] = {}
        self.proxies: list[ProxyProc] = []
        self.client: ControllerClient | None = None

    async def start(self) -> None:
        self.namesrv, self.client = await start_control_plane(self.tmp, self.controllers)
        for name in self.names:
            self.brokers[name] = []
            for i in range(self.replicas):
                root = self.tmp / name / f"b{i}"
                root.mkdir(parents=True, exist_ok=True)
                self.brokers[name].append(await start_broker(root, free_ip(), args=(), **{
                    "brokerClusterName": CLUSTER, "brokerName": name,
                    "namesrvAddr": self.namesrv.addr,
                    "storePathRootDir": str(root / "store"),
                    "enableControllerMode": "true",
                    "controllerAddr": self.controllers.controller_addr,
                    "enableProxy": "true", "allAckInSyncStateSet": "true",
                    "mappedFileSizeCommitLog": str(8 * 1024 * 1024),
                    "flushDiskType": "ASYNC_FLUSH", **self.broker_props}))

    async def start_proxy(self, **props: str) -> ProxyProc:
        ip = free_ip()
        port = free_port(ip)
        conf = self.tmp / f"proxy-{ip}-{port}.conf"
        values = {"bindAddress": ip, "grpcServerPort": str(port),
                  "controllerAddr": self.controllers.controller_addr,
                  "namesrvAddr": self.namesrv.addr if self.namesrv else "", **props}
        conf.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
        argv = [sys.executable, "-m", "mqcluster.proxy.main", "-c", str(conf)]
        proxy = ProxyProc("mqproxy", argv, self.tmp / f"proxy-{port}.log", addr=f"{ip}:{port}")
        await proxy.start("boot success")
        self.proxies.append(proxy)
        return proxy

    async def replica_info(self, name: str) -> ReplicaInfo:
        assert self.client is not None
        return await self.client.get_replica_info(name)

    def index_of(self, name: str, addr: str | None) -> int | None:
        return next((i for i, b in enumerate(self.brokers[name]) if b.addr == addr), None)

    def alive(self, name: str, i: int) -> bool:
        p = self.brokers[name][i].proc
        return p is not None and p.returncode is None

    async def wait_master(self, name: str, timeout: float = 30.0, *,
                          not_index: int | None = None) -> int:
        async with asyncio.timeout(timeout):
            while True:
                with contextlib.suppress(Exception):
                    i = self.index_of(name, (await self.replica_info(name)).master_address)
                    if i is not None and i != not_index and self.alive(name, i):
                        return i
                await asyncio.sleep(0.05)

    async def wait_in_sync(self, timeout: float = 60.0) -> None:
        async with asyncio.timeout(timeout):
            for name in self.names:
                while True:
                    with contextlib.suppress(Exception):
                        info = await self.replica_info(name)
                        if len(info.sync_state_set) >= self.replicas:
                            break
                    await asyncio.sleep(0.1)

    def signal(self, name: str, i: int, sig: signal.Signals) -> None:
        p = self.brokers[name][i].proc
        assert p is not None
        os.kill(p.pid, sig)

    async def kill(self, name: str, i: int) -> None:
        await self.brokers[name][i].kill()

    def logs(self) -> str:
        out = []
        for proc in [*self.proxies, *(b for bs in self.brokers.values() for b in bs)]:
            with contextlib.suppress(OSError):
                tail = proc.log_path.read_text(errors="replace").splitlines()[-15:]
                out.append(f"--- {proc.log_path.name}\n" + "\n".join(tail))
        return "\n".join(out)

    async def close(self) -> None:
        for proxy in self.proxies:
            await proxy.kill()
        for group in self.brokers.values():
            for broker in group:
                with contextlib.suppress(ProcessLookupError, AssertionError):
                    p = broker.proc
                    if p is not None and p.returncode is None:
                        os.kill(p.pid, signal.SIGCONT)
                await broker.kill()
        await stop_control_plane(self.namesrv, self.controllers, self.client)
