"""Classic master-slave mode (``brokerRole``): no controller, no automatic failover.

The master (``brokerId=0``) serves its slaves over the same HA stream as controller
mode, under one fixed epoch; a slave learns its master's address from the name
servers and copies the commitlog. ``SYNC_MASTER`` acknowledges a write once a slave
has it (``FLUSH_SLAVE_TIMEOUT`` after ``slaveTimeout`` otherwise); ``ASYNC_MASTER``
once it is written locally. While the master is gone, consumers still read from the
slave; writes wait for the master to return (the trade-offs of RocketMQ's master-slave
deployment).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from mqcluster.broker.acl_gate import inner_credentials
from mqcluster.broker.config import MASTER_ID, BrokerRole
from mqcluster.broker.context import BrokerContext, ReplicaRole
from mqcluster.broker.slave_sync import MetadataSync
from mqcluster.client.broker_api import BrokerApi
from mqcluster.ha.master import HAMasterOptions, HAMasterService
from mqcluster.ha.slave import HASlaveClient, HASlaveOptions
from mqcluster.store.epoch_file import EpochFileCache

log = logging.getLogger(__name__)

FIXED_EPOCH = 1


def classic_options(ctx: BrokerContext) -> HAMasterOptions:
    cfg = ctx.config
    sync = cfg.brokerRole is BrokerRole.SYNC_MASTER
    return HAMasterOptions(
        heartbeat_interval_s=cfg.haSendHeartbeatInterval / 1000,
        max_not_caught_up_ms=cfg.haMaxTimeSlaveNotCatchup,
        in_sync_replicas=2 if sync else 1,
        slave_timeout_s=cfg.slaveTimeout / 1000,
        gate_dispatch=False,
    )


class ClassicReplication:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        cfg = ctx.config
        store = ctx.store
        self.epochs = EpochFileCache.load(str(cfg.epoch_file))
        self.epochs.truncate_suffix_by_offset(store.commitlog_max_offset + 1)
        self.master = HAMasterService(store, self.epochs, classic_options(ctx))
        store.write_gate = self.master
        self.slave: HASlaveClient | None = None
        self.brokers = BrokerApi(timeout=1.0, credentials=inner_credentials(ctx.config))
        self._server: asyncio.Server | None = None
        self._following: asyncio.Task[None] | None = None
        self.metadata = MetadataSync(ctx, cfg.slaveSyncInterval)
        ctx.config_listeners.append(
            lambda _cfg: setattr(self.master, "options", classic_options(ctx)))

    async def start(self) -> None:
        cfg = self.ctx.config
        store = self.ctx.store
        if cfg.is_master:
            self._server = await asyncio.get_running_loop().create_server(
                self.master.connection, cfg.bindAddress, cfg.haListenPort)
            if self.epochs.last_epoch != FIXED_EPOCH:
                self.epochs.append(FIXED_EPOCH, store.commitlog_max_offset)
            self.master.activate(MASTER_ID, {MASTER_ID}, 0, self._accept)
        else:
            self.ctx.role_listeners.append(self._role_changed)
            self.metadata.start()

    async def _accept(self, members: set[int]) -> tuple[set[int], int]:
        """No controller: the master's own view of its in-sync slaves is the set."""
        view = self.master.view
        return members, (view.epoch + 1 if view is not None else 1)

    def _role_changed(self, old: ReplicaRole, new: ReplicaRole) -> None:
        if new.master_addr and new.master_addr != old.master_addr:
            if self._following is not None:
                self._following.cancel()
            self._following = asyncio.get_running_loop().create_task(
                self._follow(new.master_addr))

    async def _follow(self, master_addr: str) -> None:
        """Copy from the master at ``master_addr`` (its HA address from its runtime info)."""
        while True:
            try:
                table = await self.brokers.runtime_info(master_addr)
                break
            except Exception as exc:
                log.info("master %s not answering yet (%s)", master_addr, exc)
                await asyncio.sleep(1.0)
        if self.slave is not None:
            await self.slave.stop()
        cfg = self.ctx.config
        self.slave = HASlaveClient(self.ctx.store, self.epochs, table["haServerAddr"],
                                   HASlaveOptions(cfg.brokerId, cfg.syncFromLastFile))
        self.slave.start()
        log.info("replicating from master %s (HA %s)", master_addr, table["haServerAddr"])

    def lag_bytes(self) -> dict[int, int]:
        """Master: bytes each slave is behind."""
        end = self.ctx.store.commitlog_max_offset
        return {b: max(0, end - off) for b, off in self.master.slave_offsets().items()}

    async def stop(self) -> None:
        await self.metadata.stop()
        if self._following is not None:
            self._following.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._following
        if self.slave is not None:
            await self.slave.stop()
        await self.master.deactivate()
        if self._server is not None:
            self._server.close()
        await self.brokers.close()
