"""The clusters a chaos scenario runs, every process on its own namespace host.

``ControllerCluster``: 3 ``mqcontroller``, 1 ``mqnamesrv``, a controller-mode group of
3 ``mqbroker`` with ``allAckInSyncStateSet=true`` and SYNC_FLUSH (so a slow disk is on
the path of every acknowledgement). ``DLedgerCluster``: 1 ``mqnamesrv`` and a DLedger
group of 3. Both have a ``client`` host for the workload. Every broker and controller
starts with its own fault-seam files (slow fsync, wall-clock offset) in the run
directory; writing them is how the faults reach the processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from abc import ABC, abstractmethod
from pathlib import Path

from chaos.netns import Host, Network
from chaos.process import HostProcess
from mqcluster.broker.dledger import DLEDGER_STATUS, PROPERTY_DLEDGER_INDEX
from mqcluster.common.wallclock import ENV as CLOCK_ENV
from mqcluster.controller.client import ControllerClient, ReplicaInfo
from mqcluster.store.fsync_seam import ENV as FSYNC_ENV
from mqcluster.store.message import PROPERTY_MSG_GROUP, StoredMessage
from mqcluster.store.offline import iter_messages
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.rpc import RpcClient, RpcError
from mqcluster_audit import stores

TOPIC = "ChaosTopic"
CONSUMER_GROUP = "ChaosGroup"
NAMESRV_PORT = 9876
CONTROLLER_PORT = 9878
DLEDGER_PORT = 40911
BROKER_PORTS = {"listenPort": 10911, "haListenPort": 10912, "grpcServerPort": 8081,
                "metricsPromExporterPort": 5557}


class ChaosCluster(ABC):
    mode: str
    group: str

    def __init__(self, net: Network, workdir: Path) -> None:
        self.net = net
        self.dir = workdir
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

    def messages(self, i: int) -> list[StoredMessage]:
        return [m for m in iter_messages(str(self.store_dir(i) / "commitlog"))
                if m.topic == TOPIC]

    def position(self, m: StoredMessage) -> str:
        return str(m.queue_offset)

    def message_group(self, m: StoredMessage) -> str | None:
        return m.properties.get(PROPERTY_MSG_GROUP)

    # ------------------------------------------------------------------ teardown

    async def close(self) -> None:
        procs = [*self.brokers, *self.controllers, *([self.namesrv] if self.namesrv else [])]
        for p in procs:
            with contextlib.suppress(Exception):
                p.wake()
                await p.kill()
        await self.rpc.close()

    def logs(self) -> str:
        procs = [*self.controllers, *([self.namesrv] if self.namesrv else []), *self.brokers]
        return "\n".join(f"--- {p.name}\n{p.log_tail()}" for p in procs)


class ControllerCluster(ChaosCluster):
    mode = "controller"
    group = "chaos-c"

    def __init__(self, net: Network, workdir: Path) -> None:
        super().__init__(net, workdir)
        self.client_api: ControllerClient | None = None

    @property
    def controller_addr(self) -> str:
        return ";".join(f"{c.host.address}:{CONTROLLER_PORT}" for c in self.controllers)

    async def start_members(self) -> None:
        hosts = [self.net.add_host(f"c{i}") for i in range(3)]
        peers = ";".join(f"n{i}-{h.address}:{CONTROLLER_PORT}" for i, h in enumerate(hosts))
        for i, h in enumerate(hosts):
            opts = {"controllerDLegerGroup": "chaos", "controllerDLegerPeers": peers,
                    "controllerDLegerSelfId": f"n{i}",
                    "controllerStorePath": str(self.dir / f"c{i}" / "store"),
                    "scanNotActiveBrokerInterval": "200",
                    "brokerHeartbeatTimeoutMills": "1500"}
            args = ["-m", "mqcluster.controller.main"]
            for k, v in opts.items():
                args += ["-o", f"{k}={v}"]
            self.controllers.append(HostProcess.python(
                f"c{i}", h, args, self.dir / f"c{i}.log", "started on", self.seam_env(f"c{i}")))
        await asyncio.gather(*(c.start() for c in self.controllers))
        self.client_api = ControllerClient(self.controller_addr, timeout=1.0, retry_timeout=3)
        for i in range(3):
            self.add_broker(
                i, self.net.add_host(f"b{i}"), enableControllerMode="true",
                controllerAddr=self.controller_addr,
                allAckInSyncStateSet="true", flushDiskType="SYNC_FLUSH",
                syncBrokerMetadataPeriod="500", brokerHeartbeatInterval="300",
                controllerHeartBeatTimeoutMills="1500", haSendHeartbeatInterval="300",
                haMaxTimeSlaveNotCatchup="4000", slaveTimeout="3000")
        await asyncio.gather(*(b.start() for b in self.brokers))

    async def replica_info(self) -> ReplicaInfo:
        assert self.client_api is not None
        return await self.client_api.get_replica_info(self.group)

    async def master(self) -> int | None:
        addr = (await self.replica_info()).master_address
        return next((i for i in range(len(self.brokers)) if self.broker_addr(i) == addr), None)

    async def healthy(self) -> bool:
        try:
            info = await self.replica_info()
        except Exception:
            return False
        m = await self.master()
        return (m is not None and len(info.sync_state_set) == len(self.brokers)
                and all(b.alive and not b.stopped for b in self.brokers))

    async def active_controller(self) -> int | None:
        assert self.client_api is not None
        for i, c in enumerate(self.controllers):
            if not c.alive:
                continue
            with contextlib.suppress(Exception):
                meta = await asyncio.wait_for(
                    self.client_api.get_metadata(f"{c.host.address}:{CONTROLLER_PORT}"), 1.0)
                if meta.is_leader:
                    return i
        return None

    async def stop_brokers(self) -> int:
        m = await self.wait_master(30)
        for i in sorted(range(len(self.brokers)), key=lambda i: i == m):  # master last
            await self.brokers[i].terminate()
        return m

    def replicas_identical(self) -> tuple[bool, str]:
        logs = [self.commitlog(i).rstrip(b"\0") for i in range(len(self.brokers))]
        confirms = [stores.confirm_offset(self.store_dir(i)) or 0
                    for i in range(len(self.brokers))]
        confirm = max(confirms)
        shortest = min(len(c) for c in logs)
        if shortest < confirm:
            return False, f"a replica ends at {shortest}, below confirmOffset {confirm}"
        same = all(c[:shortest] == logs[0][:shortest] for c in logs)
        return same, f"identical up to {shortest} (confirmOffset {confirm})" if same else \
            f"commitlogs differ below {shortest} (confirmOffset {confirm})"

    async def close(self) -> None:
        await super().close()
        if self.client_api is not None:
            await self.client_api.close()


class DLedgerCluster(ChaosCluster):
    mode = "dledger"
    group = "chaos-d"

    async def start_members(self) -> None:
        hosts = [self.net.add_host(f"b{i}") for i in range(3)]
        peers = ";".join(f"n{i}-{h.address}:{DLEDGER_PORT}" for i, h in enumerate(hosts))
        for i, h in enumerate(hosts):
            self.add_broker(i, h, enableDLegerCommitLog="true", dLegerGroup=self.group,
                            dLegerPeers=peers, dLegerSelfId=f"n{i}",
                            preferredLeaderIds="n0")
        await asyncio.gather(*(b.start() for b in self.brokers))

    async def status(self, i: int) -> dict[str, object] | None:
        if not self.brokers[i].alive or self.brokers[i].stopped:
            return None
        try:
            resp = await self.rpc.invoke(self.broker_addr(i),
                                         RemotingCommand.request(DLEDGER_STATUS), 1.0)
        except (RpcError, OSError, TimeoutError):
            return None
        data = json.loads(resp.body or b"{}")
        return data if isinstance(data, dict) else None

    async def master(self) -> int | None:
        for i in range(len(self.brokers)):
            st = await self.status(i)
            if st is not None and st.get("role") == "LEADER":
                return i
        return None

    async def healthy(self) -> bool:
        sts = [await self.status(i) for i in range(len(self.brokers))]
        return (all(s is not None for s in sts)
                and any(s.get("role") == "LEADER" for s in sts if s)
                and len({s["appliedIndex"] for s in sts if s}) == 1)

    async def stop_brokers(self) -> int:
        m = await self.wait_master(30)
        for b in self.brokers:
            await b.terminate()
        return m

    def replicas_identical(self) -> tuple[bool, str]:
        logs = [self.commitlog(i).rstrip(b"\0") for i in range(len(self.brokers))]
        same = all(c == logs[0] for c in logs)
        return same, (f"identical, {len(logs[0])} bytes (all applied to the commit index)"
                      if same else f"commitlogs differ (lengths {[len(c) for c in logs]})")

    def position(self, m: StoredMessage) -> str:
        return m.properties.get(PROPERTY_DLEDGER_INDEX) or str(m.queue_offset)
