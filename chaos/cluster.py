"""What every chaos cluster has, every process on its own namespace host: a name
server, a broker group of 3, a ``client`` host for the workload, and the offline reads
of the stores. Every broker and controller starts with its own fault-seam files (slow
fsync, wall-clock offset) in the run directory; writing them is how the faults reach
the processes. With ``lazy``, each broker's store directory is a ``chaos.lazyfs`` mount
(its synced state in ``b<i>/store.disk``), so that a power loss can drop what the
broker had not fsynced. The replication modes are ``chaos.controller_mode`` and
``chaos.dledger_mode``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from chaos.lazymount import LazyMount
from chaos.netns import Host, Network
from chaos.process import HostProcess
from mqcluster.common.wallclock import ENV as CLOCK_ENV
from mqcluster.protocol.properties import PROPERTY_MSG_GROUP
from mqcluster.store.fsync_seam import ENV as FSYNC_ENV
from mqcluster.store.message import StoredMessage
from mqcluster.store.offline import iter_messages
from mqcluster.wire.rpc import RpcClient

TOPIC = "ChaosTopic"
CONSUMER_GROUP = "ChaosGroup"
NAMESRV_PORT = 9876
BROKER_PORTS = {"listenPort": 10911, "haListenPort": 10912, "grpcServerPort": 8081,
                "metricsPromExporterPort": 5557}


class ChaosCluster(ABC):
    mode: str
    """The replication mode, which picks the faults that apply."""
    group: str
    promises_no_loss = True
    """Whether a power loss of every replica at once may lose acknowledged messages
    (ASYNC_FLUSH may: its loss is measured, not held to zero)."""

    def __init__(self, net: Network, workdir: Path, lazy: bool = False) -> None:
        self.net = net
        self.dir = workdir
        self.lazy = lazy
        self.mounts: list[LazyMount | None] = []
        self.power_losses: list[int] = []
        """Wall-clock ms of each power loss (the replicas killed), for the loss window."""
        self.namesrv: HostProcess | None = None
        self.controllers: list[HostProcess] = []
        self.brokers: list[HostProcess] = []
        self.broker_props: list[dict[str, str]] = []
        self.client: Host | None = None
        self.rpc = RpcClient(connect_timeout=0.5)

    # ------------------------------------------------------------------ seams

    def seam_file(self, proc: HostProcess, seam: str) -> Path:
        return self.dir / f"{proc.name}.{seam}"

    def seam_env(self, name: str) -> dict[str, str]:
        for seam in ("fsync-delay-ms", "clock-offset-ms"):
            (self.dir / f"{name}.{seam}").write_text("0")
        return {FSYNC_ENV: str(self.dir / f"{name}.fsync-delay-ms"),
                CLOCK_ENV: str(self.dir / f"{name}.clock-offset-ms")}

    # ------------------------------------------------------------------ start

    async def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.client = self.net.add_host("client")
        ns_host = self.net.add_host("namesrv")
        self.namesrv = HostProcess.python(
            "namesrv", ns_host, ["-m", "mqcluster.namesrv.main", "-p", str(NAMESRV_PORT),
                                 "--bindAddress", ns_host.address],
            self.dir / "namesrv.log", "boot success")
        await self.namesrv.start()
        await self.start_members()
        await self.wait_healthy(90)
        await self.create_topic()

    @abstractmethod
    async def start_members(self) -> None: ...

    def add_broker(self, i: int, host: Host, **props: str) -> HostProcess:
        root = self.dir / f"b{i}"
        root.mkdir(parents=True, exist_ok=True)
        mount = None
        if self.lazy:
            mount = LazyMount(root / "store", root / "store.disk", self.dir / f"b{i}.lazyfs.log")
            mount.mount_sync()
        self.mounts.append(mount)
        assert self.namesrv is not None
        values = {
            "brokerClusterName": f"Chaos{self.mode.title()}", "brokerName": self.group,
            "brokerIP1": host.address, "bindAddress": host.address,
            **{k: str(v) for k, v in BROKER_PORTS.items()},
            "namesrvAddr": f"{self.namesrv.host.address}:{NAMESRV_PORT}",
            "storePathRootDir": str(root / "store"), "enableProxy": "true",
            "registerNameServerPeriod": "1000", "slaveSyncInterval": "500",
            "mappedFileSizeCommitLog": str(8 * 1024 * 1024),
            "maxMessageSize": str(1024 * 1024), **props,
        }
        conf = root / "broker.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
        name = f"b{i}"
        proc = HostProcess.python(name, host, ["-m", "mqcluster.broker.main", "-c", str(conf)],
                                  self.dir / f"{name}.log", "boot success",
                                  self.seam_env(name))
        self.brokers.append(proc)
        self.broker_props.append(values)
        return proc

    def broker_addr(self, i: int) -> str:
        return f"{self.brokers[i].host.address}:{BROKER_PORTS['listenPort']}"

    @property
    def endpoints(self) -> str:
        """Every replica's gRPC endpoint: each serves the whole group."""
        return ";".join(f"{b.host.address}:{BROKER_PORTS['grpcServerPort']}"
                        for b in self.brokers)

    def store_dir(self, i: int) -> Path:
        return Path(self.broker_props[i]["storePathRootDir"])

    async def create_topic(self) -> None:
        """A FIFO topic and an orderly consumer group on the master (slaves copy both)."""
        m = await self.wait_master(60)
        admin = [sys.executable, "-m", "mqcluster.admin.main"]
        for args in (["updateTopic", "-b", self.broker_addr(m), "-t", TOPIC, "-r", "4",
                      "-w", "4", "-a", "+message.type=FIFO"],
                     ["updateSubGroup", "-b", self.broker_addr(m), "-g", CONSUMER_GROUP,
                      "-o", "true"]):
            done = await asyncio.to_thread(subprocess.run, [*admin, *args],
                                           capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"mqadmin {args[0]}: {done.stdout}{done.stderr}")

    # ------------------------------------------------------------------ state

    @abstractmethod
    async def master(self) -> int | None:
        """The index of the broker that is master (leader) now, as the group sees it."""

    async def wait_master(self, timeout: float = 30.0, *, not_index: int | None = None) -> int:
        async with asyncio.timeout(timeout):
            while True:
                with contextlib.suppress(Exception):
                    i = await self.master()
                    if i is not None and i != not_index and self.brokers[i].alive:
                        return i
                await asyncio.sleep(0.05)

    @abstractmethod
    async def healthy(self) -> bool:
        """Every replica back and in step (SyncStateSet full / all caught up)."""

    async def wait_healthy(self, timeout: float = 60.0) -> None:
        async with asyncio.timeout(timeout):
            while not await self.healthy():
                await asyncio.sleep(0.1)

    # ------------------------------------------------------------------ checks

    @abstractmethod
    async def stop_brokers(self) -> int:
        """Stop every broker cleanly for the offline checks; the final master's index."""

    @abstractmethod
    def replicas_identical(self) -> tuple[bool, str]:
        """Whether the replicas' commitlogs agree where they must, and how far."""

    def commitlog(self, i: int) -> bytes:
        d = self.store_dir(i) / "commitlog"
        return b"".join((d / n).read_bytes() for n in sorted(os.listdir(d)))

    def commitlogs(self) -> list[bytes]:
        """Every replica's commitlog, without the zeros after its last record."""
        return [self.commitlog(i).rstrip(b"\0") for i in range(len(self.brokers))]

    def records(self, i: int) -> list[StoredMessage]:
        """Every message of replica ``i``'s commitlog, whatever its topic."""
        return list(iter_messages(str(self.store_dir(i) / "commitlog")))

    def messages(self, i: int) -> list[StoredMessage]:
        return [m for m in self.records(i) if m.topic == TOPIC]

    def position(self, m: StoredMessage) -> str:
        return str(m.queue_offset)

    def message_group(self, m: StoredMessage) -> str | None:
        return m.properties.get(PROPERTY_MSG_GROUP)

    # ------------------------------------------------------------------ power

    async def power_cycle(self, i: int) -> dict[str, Any]:
        """Broker ``i`` is down: its store loses every write not fsynced, and its
        filesystem is ended and mounted again (nothing of it stays in the kernel's
        caches); what was lost."""
        mount = self.mounts[i] if i < len(self.mounts) else None
        if mount is None:
            raise RuntimeError("power loss needs the stores on lazyfs (FUSE) mounts")
        assert not self.brokers[i].alive, "a power loss hits stopped replicas only"
        lost = await mount.power_off()
        await mount.mount()
        return lost

    # ------------------------------------------------------------------ teardown

    async def close(self) -> None:
        procs = [*self.brokers, *self.controllers, *([self.namesrv] if self.namesrv else [])]
        for p in procs:
            with contextlib.suppress(Exception):
                p.wake()
                await p.kill()
        for m in self.mounts:
            if m is not None:
                with contextlib.suppress(Exception):
                    await m.unmount()
        await self.rpc.close()

    def logs(self) -> str:
        procs = [*self.controllers, *([self.namesrv] if self.namesrv else []), *self.brokers]
        return "\n".join(f"--- {p.name}\n{p.log_tail()}" for p in procs)

