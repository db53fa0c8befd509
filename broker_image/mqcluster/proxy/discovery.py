"""Where the proxy learns the groups, their masters and the masters' gRPC endpoints.

- Controllers (controller mode): a WATCH_MASTERS long-poll held on the active
  controller answers the moment an election is applied, so a new master is known
  within a round trip; where the controllers do not serve it, they are polled.
- Name servers: every group's registered replicas and their gRPC endpoints (which
  resolve a controller-named master at once), and, where no controller is given, the
  masters themselves (brokerId 0 of each group), polled.

A master whose gRPC endpoint is not known yet is asked for it (its runtime info).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from mqcluster.client.controller import ControllerClient, ControllerError
from mqcluster.client.namesrv import NamesrvClient, TopicNotExistError
from mqcluster.common.tasks import cancel_all
from mqcluster.protocol import controller_watch as master_watch
from mqcluster.proxy.config import ProxyConfig
from mqcluster.proxy.groups import GroupTable

log = logging.getLogger(__name__)

MASTER_ID = 0
WATCH_MS = 10_000
ROUTE_LOOKUP_S = 0.5
REQUEST_CODE_NOT_SUPPORTED = 3
GrpcResolver = Callable[[str], Awaitable[str | None]]


class Discovery:
    def __init__(self, config: ProxyConfig, table: GroupTable, resolve: GrpcResolver,
                 on_lookup_failure: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.table = table
        self.resolve = resolve
        self.on_lookup_failure = on_lookup_failure
        self.grpc_of: dict[str, str] = {}
        """Remoting address -> gRPC endpoint of every replica seen."""
        self.controllers = (ControllerClient(config.controllerAddr, timeout=WATCH_MS / 1000 + 2,
                                             retry_timeout=1.0)
                            if config.controllerAddr else None)
        self.namesrv = NamesrvClient(config.namesrvAddr) if config.namesrvAddr else None
        self.cluster_groups: set[str] | None = None
        self.controller_groups: set[str] = set()
        """Groups whose masters come from the controllers (controller mode)."""
        self.namesrv_groups: set[str] = set()
        """Groups whose masters come from the name servers."""
        self._tasks: list[asyncio.Task[None]] = []
        self.first_round = asyncio.Event()

    def wanted(self, group: str) -> bool:
        if self.config.brokerName is not None:
            return group == self.config.brokerName
        return self.cluster_groups is None or group in self.cluster_groups

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self.namesrv is not None:
            self._tasks.append(loop.create_task(self._namesrv_loop(), name="proxy-namesrv"))
        if self.controllers is not None:
            self._tasks.append(loop.create_task(self._controller_loop(), name="proxy-watch"))

    async def stop(self) -> None:
        await cancel_all(self._tasks)
        if self.controllers is not None:
            await self.controllers.close()
        if self.namesrv is not None:
            await self.namesrv.close()

    def _failed(self, source: str, exc: BaseException) -> None:
        log.debug("%s lookup failed: %s", source, exc)
        if self.on_lookup_failure is not None:
            self.on_lookup_failure(source)

    # ---- name servers

    async def _namesrv_loop(self) -> None:
        cfg = self.config
        while True:
            try:
                await self.namesrv_round()
            except Exception as exc:
                self._failed("namesrv", exc)
            # Fast while some group's master comes from here, else only endpoints do.
            masters_here = self.controllers is None or self.namesrv_groups
            await asyncio.sleep((cfg.masterPollIntervalMs if masters_here
                                 else cfg.namesrvPollIntervalMs) / 1000)

    async def namesrv_round(self) -> None:
        """Every replica's gRPC endpoint; the masters of groups the controllers do not
        know (DLedger and master-slave groups: their brokerId 0)."""
        assert self.namesrv is not None
        info = await self.namesrv.get_cluster_info()
        if self.config.brokerClusterName is not None:
            self.cluster_groups = set(info.clusterAddrTable.get(self.config.brokerClusterName,
                                                                []))
        seen: set[str] = set()
        for name, data in info.brokerAddrTable.items():
            for bid, addr in data.brokerAddrs.items():
                grpc = data.proxyAddrs.get(bid)
                if grpc:
                    self.grpc_of[addr] = grpc
            if name in self.controller_groups or not self.wanted(name):
                continue
            master = data.brokerAddrs.get(MASTER_ID)
            grpc = data.proxyAddrs.get(MASTER_ID) or (
                await self._grpc(master) if master else None)
            self.table.sighted(name, master, grpc, 0)
            seen.add(name)
        for name in self.namesrv_groups - seen:
            if name not in self.controller_groups:
                self.table.forget(name)
        self.namesrv_groups = seen
        if self.controllers is None:
            self.first_round.set()

    async def topic_groups(self, topic: str) -> set[str] | None:
        """The groups the name servers route ``topic`` to; None where they do not know it
        or cannot say (then every group is asked, and may create it)."""
        if self.namesrv is None:
            return None
        try:
            route = await asyncio.wait_for(self.namesrv.get_route(topic), ROUTE_LOOKUP_S)
        except TopicNotExistError:
            return None
        except Exception as exc:
            self._failed("namesrv", exc)
            return None
        return {b.brokerName for b in route.brokerDatas}

    # ---- controllers

    async def _controller_loop(self) -> None:
        known: dict[str, int] = {}
        supported = True
        while True:
            try:
                if supported:
                    masters = await self.watch(known, WATCH_MS if self._all_resolved() else 0)
                else:
                    masters = await self.poll_replicas()
            except WatchUnsupported:
                log.info("the controllers do not serve WATCH_MASTERS: polling them")
                supported = False
                continue
            except Exception as exc:
                self._failed("controller", exc)
                await asyncio.sleep(self.config.masterPollIntervalMs / 1000)
                continue
            await self.apply(masters)
            known = {g: m.master_epoch for g, m in masters.items()}
            self.first_round.set()
            if not supported or not self._all_resolved():
                await asyncio.sleep(self.config.masterPollIntervalMs / 1000)

    def _all_resolved(self) -> bool:
        return all(s.grpc or not s.master_addr for s in self.table.groups.values())

    async def watch(self, known: dict[str, int],
                    wait_ms: int) -> dict[str, master_watch.GroupMaster]:
        assert self.controllers is not None
        try:
            return await self.controllers.watch_masters(known, wait_ms)
        except ControllerError as exc:
            if exc.code == REQUEST_CODE_NOT_SUPPORTED:
                raise WatchUnsupported(exc.remark or "") from exc
            raise RuntimeError(f"WATCH_MASTERS refused: {exc.code} {exc.remark}") from exc

    async def poll_replicas(self) -> dict[str, master_watch.GroupMaster]:
        assert self.controllers is not None
        names = ([self.config.brokerName] if self.config.brokerName is not None
                 else sorted(self.cluster_groups or self.table.names()))
        out = {}
        for name in names:
            info = await self.controllers.get_replica_info(name)
            out[name] = master_watch.GroupMaster(info.master_address or None, info.master_epoch)
        return out

    async def apply(self, masters: dict[str, master_watch.GroupMaster]) -> None:
        wanted = {name: m for name, m in masters.items() if self.wanted(name)}
        for name, m in wanted.items():
            grpc = await self._grpc(m.master_address) if m.master_address else None
            self.table.sighted(name, m.master_address, grpc, m.master_epoch)
            for addr in m.replicas:  # learn every replica's endpoint before it is master
                if addr not in self.grpc_of:
                    asyncio.get_running_loop().create_task(self._grpc(addr))
        for name in self.controller_groups - set(wanted):
            self.table.forget(name)
        self.controller_groups = set(wanted)

    async def _grpc(self, addr: str) -> str | None:
        known = self.grpc_of.get(addr)
        if known:
            return known
        try:
            known = await self.resolve(addr)
        except Exception as exc:
            log.info("broker %s does not tell its gRPC endpoint yet: %s", addr, exc)
            return None
        if known:
            self.grpc_of[addr] = known
        return known


class WatchUnsupported(Exception):
    """The controllers answered WATCH_MASTERS with REQUEST_CODE_NOT_SUPPORTED."""
