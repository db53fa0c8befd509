"""Controller mode on the broker (RIP-44's ReplicasManager).

The controller decides who is master: this broker obtains its id (kept in its
identity file), registers, heartbeats (epoch, max offset, election priority) to
every controller, polls its replica info and reacts at once to role-change
notifications. It then changes role:

- to master: cut the commitlog to its last whole message, record
  ``<masterEpoch, startOffset>`` in the epoch file, wait for dispatch, serve slaves
  and take writes, each acknowledged as ``allAckInSyncStateSet`` / ``inSyncReplicas``
  ask; SyncStateSet changes go to the controller and apply only once accepted;
- to slave: stop taking writes, cut to the last whole message, replicate from
  the master (handshake truncation, then transfer).

Each change is announced through ``BrokerContext.set_role``: the name-server
registration follows at once (the master registers as brokerId 0), and the gRPC
endpoint forwards client calls to the master it names.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mqcluster.broker.acl_gate import inner_credentials
from mqcluster.broker.broker_identity import register_with_controller
from mqcluster.broker.config import MASTER_ID, BrokerConfig
from mqcluster.broker.context import BrokerContext, ReplicaRole
from mqcluster.broker.slave_sync import sync_from_master
from mqcluster.client.broker_api import BrokerApi
from mqcluster.client.controller import ControllerClient, ControllerError, ReplicaInfo
from mqcluster.client.errors import ClientError
from mqcluster.common.tasks import cancel_all
from mqcluster.ha.master import HAMasterOptions, HAMasterService
from mqcluster.ha.replica_hosts import ReplicaHosts
from mqcluster.ha.slave import HASlaveClient, HASlaveOptions
from mqcluster.protocol.controller import (
    BrokerHeartbeatRequestHeader,
    EpochEntryCache,
    NotifyBrokerRoleChangedRequestHeader,
    RequestCode,
    SyncStateSetBody,
    response,
)
from mqcluster.protocol.epochs import EpochEntry
from mqcluster.store.api import MessageStore
from mqcluster.store.epoch_file import EpochFileCache
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.rpc import Connection, HandlerRegistry, RpcError

log = logging.getLogger(__name__)

RETRY_S = 0.5
JOB_ERRORS = (ControllerError, ClientError, RpcError, OSError, TimeoutError, ValueError)
"""What a talk with the controller or another broker may fail with: logged, retried."""
MASTER_INFO_TRIES = 4


@dataclass(frozen=True)
class MasterEndpoints:
    ha: str
    grpc: str | None


def master_options(cfg: BrokerConfig) -> HAMasterOptions:
    return HAMasterOptions(
        heartbeat_interval_s=cfg.haSendHeartbeatInterval / 1000,
        max_not_caught_up_ms=cfg.haMaxTimeSlaveNotCatchup,
        all_ack_in_sync_state_set=cfg.allAckInSyncStateSet,
        in_sync_replicas=cfg.inSyncReplicas,
        min_in_sync_replicas=cfg.minInSyncReplicas,
        slave_timeout_s=cfg.slaveTimeout / 1000,
    )


class ReplicasManager:
    def __init__(self, ctx: BrokerContext, registry: HandlerRegistry) -> None:
        cfg = ctx.config
        self.ctx = ctx
        self.config = cfg
        store: MessageStore = ctx.store
        self.store = store
        self.epochs = EpochFileCache.load(str(cfg.epoch_file))
        # Recovery may have cut the commitlog below terms the file still names.
        self.epochs.truncate_suffix_by_offset(store.commitlog_max_offset + 1)
        self.master = HAMasterService(store, self.epochs, master_options(cfg))
        self.master.slave_hosts = ReplicaHosts(self._group_replicas)
        store.write_gate = self.master
        self.slave: HASlaveClient | None = None
        self.client = ControllerClient(cfg.controller_addrs, retry_timeout=5.0)
        self.brokers = BrokerApi(timeout=1.0, credentials=inner_credentials(ctx.config))
        self.broker_id: int | None = None
        """Id given by the controller (the name servers see 0 while this is master)."""
        self.master_epoch = 0
        self.sync_state_set: set[int] = set()
        self.sync_state_set_epoch = 0
        self.master_broker_id: int | None = None
        self._lock = asyncio.Lock()
        self._role_known = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._ha_server: asyncio.Server | None = None
        self.correct_epochs()
        ctx.config_listeners.append(self._config_changed)
        registry.register(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, self._on_notify)
        registry.register(RequestCode.GET_BROKER_EPOCH_CACHE, self._on_get_epoch_cache)
        ignored = {"brokerId", "brokerRole"} & cfg.model_fields_set
        if ignored:
            log.warning("%s ignored: in controller mode the controller assigns them",
                        ", ".join(sorted(ignored)))
        ctx.set_role(ReplicaRole(cfg.brokerId, False))  # until the controller answers

    def _config_changed(self, cfg: BrokerConfig) -> None:
        self.config = cfg
        self.master.options = master_options(cfg)

    # ---- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        cfg = self.config
        self._ha_server = await asyncio.get_running_loop().create_server(
            self.master.connection, cfg.bindAddress, cfg.haListenPort)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._register_then_run(), name="replicas-manager")]

    async def wait_role(self) -> None:
        """Until the controller has told this broker its role."""
        await self._role_known.wait()

    async def stop(self) -> None:
        await cancel_all(self._tasks)
        self._tasks = []
        if self.slave is not None:
            await self.slave.stop()
            self.slave = None
        await self.master.deactivate()
        if self.master.slave_hosts is not None:
            await self.master.slave_hosts.close()
        if self._ha_server is not None:
            self._ha_server.close()
            self._ha_server = None
        await self.client.close()
        await self.brokers.close()

    @property
    def is_master(self) -> bool:
        return self.master.active

    # ---- controller conversation ------------------------------------------------------

    async def _register_then_run(self) -> None:
        cfg = self.config
        while self.broker_id is None:
            try:
                reg = await register_with_controller(
                    self.client, cfg.storePathRootDir, cfg.brokerClusterName, cfg.brokerName,
                    self.ctx.addresses.broker)
            except (ControllerError, RpcError, OSError, TimeoutError) as exc:
                log.warning("registration with the controller failed: %s", exc)
                await asyncio.sleep(RETRY_S)
                continue
            self.broker_id = reg.broker_id
            log.info("registered with the controller as broker %d of %s", reg.broker_id,
                     cfg.brokerName)
            try:
                await self._heartbeat()
                await self.apply(reg.replica_info)
            except JOB_ERRORS as exc:
                # Registered all the same: the periodic heartbeat and replica-info jobs
                # below take over, where an escaping error would end them all.
                log.info("first heartbeat or role after registration failed: %s", exc)
        loop = asyncio.get_running_loop()
        self._tasks += [
            loop.create_task(self._every(cfg.brokerHeartbeatInterval, self._heartbeat)),
            loop.create_task(self._every(cfg.syncBrokerMetadataPeriod, self._poll_replica_info)),
            loop.create_task(self._every(cfg.syncControllerMetadataPeriod, self._find_active)),
            loop.create_task(self._every(cfg.slaveSyncInterval, self._sync_from_master)),
        ]

    @staticmethod
    async def _every(period_ms: int, job: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(period_ms / 1000)
            try:
                await job()
            except JOB_ERRORS as exc:
                log.info("%s failed: %s", getattr(job, "__name__", "job"), exc)
            except Exception:
                log.exception("replicas manager job failed")

    def correct_epochs(self) -> None:
        """Drop terms whose segments retention deleted (RIP-44's third correction)."""
        first = self.epochs.entries[:1]
        if first and first[0].start_offset < self.store.commitlog_min_offset:
            self.epochs.truncate_prefix_by_offset(self.store.commitlog_min_offset)

    async def _heartbeat(self) -> None:
        cfg, store = self.config, self.store
        self.correct_epochs()
        header = BrokerHeartbeatRequestHeader(
            cluster_name=cfg.brokerClusterName,
            broker_addr=self.ctx.addresses.broker,
            broker_name=cfg.brokerName,
            broker_id=self.broker_id,
            epoch=self.epochs.last_epoch,
            max_offset=store.commitlog_max_offset,
            confirm_offset=self.master.confirm_offset,
            heartbeat_timeout_mills=cfg.controllerHeartBeatTimeoutMills,
            election_priority=cfg.brokerElectionPriority,
        )
        await self.client.heartbeat(header)

    async def _poll_replica_info(self) -> None:
        await self.apply(await self.client.get_replica_info(self.config.brokerName))

    async def _sync_from_master(self) -> None:
        await sync_from_master(self.ctx, self.brokers)

    async def _find_active(self) -> None:
        await self.client.find_active()

    async def _on_notify(self, cmd: RemotingCommand, _conn: Connection) -> RemotingCommand:
        h = NotifyBrokerRoleChangedRequestHeader.from_command(cmd)
        body = SyncStateSetBody.decode(cmd.body) if cmd.body else SyncStateSetBody(set(), 0)
        info = ReplicaInfo(h.master_broker_id, h.master_address, h.master_epoch,
                           body.sync_state_set, h.sync_state_set_epoch)
        asyncio.get_running_loop().create_task(self._apply_logged(info))
        return response(cmd)

    async def _apply_latest(self) -> None:
        try:
            await self._poll_replica_info()
        except Exception as exc:
            log.info("replica info not refreshed: %s", exc)

    async def _apply_logged(self, info: ReplicaInfo) -> None:
        try:
            await self.apply(info)
        except Exception:
            log.exception("role change to %s failed", info)

    async def _on_get_epoch_cache(self, cmd: RemotingCommand,
                                  _conn: Connection) -> RemotingCommand:
        cfg = self.config
        entries = self.epochs.entries
        max_offset = self.store.commitlog_max_offset
        body = EpochEntryCache(
            cfg.brokerClusterName, cfg.brokerName, self.ctx.role.broker_id,
            [EpochEntry(e.epoch, e.start_offset,
                        e.end_offset if i + 1 < len(entries) else max_offset)
             for i, e in enumerate(entries)],
            max_offset).encode()
        return response(cmd, body=body)

    # ---- role changes -----------------------------------------------------------------

    async def apply(self, info: ReplicaInfo) -> None:
        """Bring this broker's role in line with the controller's view of the group."""
        async with self._lock:
            if self.broker_id is None or info.master_epoch < self.master_epoch:
                return
            newer = info.master_epoch > self.master_epoch
            if info.master_broker_id == self.broker_id:
                if newer or not self.is_master:
                    await self._change_to_master(info)
                else:
                    self.master.sync_state_changed(info.sync_state_set, info.sync_state_set_epoch)
            elif info.master_broker_id is None or not info.master_address:
                if self.is_master:
                    log.warning("the controller names no master of epoch %d; not taking writes",
                                info.master_epoch)
                    await self.master.deactivate()
                    self.ctx.set_role(ReplicaRole(self.broker_id, False, None, None,
                                                  info.master_epoch))
            elif newer or self.is_master or self.master_broker_id != info.master_broker_id \
                    or self.slave is None:
                await self._change_to_slave(info)
            self.master_epoch = info.master_epoch
            self.master_broker_id = info.master_broker_id
            self.sync_state_set = set(info.sync_state_set)
            self.sync_state_set_epoch = info.sync_state_set_epoch

    async def _truncate_to_last_message(self) -> None:
        store = self.store
        complete = store.complete_offset
        if complete < store.commitlog_max_offset:
            await store.truncate_commitlog(complete)
        self.epochs.truncate_suffix_by_offset(store.commitlog_max_offset + 1)

    async def _change_to_master(self, info: ReplicaInfo) -> None:
        assert self.broker_id is not None
        log.info("becoming master of %s, epoch %d, SyncStateSet %s", self.config.brokerName,
                 info.master_epoch, sorted(info.sync_state_set))
        if self.slave is not None:
            await self.slave.stop()
            self.slave = None
        await self._truncate_to_last_message()
        store = self.store
        if not self.epochs.append(info.master_epoch, store.commitlog_max_offset):
            raise RuntimeError(f"epoch {info.master_epoch} at {store.commitlog_max_offset} "
                               f"does not follow the epoch file's last entry")
        members = set(info.sync_state_set) | {self.broker_id}
        if members == {self.broker_id}:
            store.set_confirm_offset(store.commitlog_max_offset)
        elif store.confirm_offset is None:
            store.set_confirm_offset(store.dispatched_offset)
        confirm = store.confirm_offset
        await store.wait_dispatched(confirm)
        self.master.activate(self.broker_id, members, info.sync_state_set_epoch,
                             self._report_sync_state_set)
        self.master_epoch = info.master_epoch
        addrs = self.ctx.addresses
        self.ctx.set_role(ReplicaRole(MASTER_ID, True, addrs.broker, addrs.grpc,
                                      info.master_epoch))
        self._role_known.set()

    async def _change_to_slave(self, info: ReplicaInfo) -> None:
        assert self.broker_id is not None and info.master_address is not None
        log.info("becoming slave of %s (broker %s), epoch %d", info.master_address,
                 info.master_broker_id, info.master_epoch)
        if self.is_master:
            await self.master.deactivate()
        if self.slave is not None:
            await self.slave.stop()
            self.slave = None
        self.ctx.set_role(ReplicaRole(self.broker_id, False, info.master_address, None,
                                      info.master_epoch))
        await self._truncate_to_last_message()
        endpoints = await self._master_endpoints(info.master_address)
        cfg = self.config
        self.slave = HASlaveClient(
            self.store, self.epochs, endpoints.ha,
            HASlaveOptions(self.broker_id, cfg.syncFromLastFile, cfg.asyncLearner,
                           source_host=self.ctx.addresses.broker.rpartition(":")[0]))
        self.slave.start()
        self.ctx.set_role(ReplicaRole(self.broker_id, False, info.master_address,
                                      endpoints.grpc, info.master_epoch))
        self._role_known.set()

    async def _group_replicas(self) -> dict[int, str]:
        """This group's registered replicas (broker id -> address), whose hosts alone the
        HA master takes slaves from."""
        name = self.config.brokerName
        info = (await self.client.get_sync_state_data([name])).replicas_info_table.get(name)
        if info is None:
            return {}
        return {r.broker_id: r.broker_address
                for r in (*info.in_sync_replicas, *info.not_in_sync_replicas)}

    async def _master_endpoints(self, master_addr: str) -> MasterEndpoints:
        """The master's HA and gRPC addresses, from its runtime info (a few tries: a
        master that does not answer is left to the next poll or notification)."""
        for attempt in range(MASTER_INFO_TRIES):
            try:
                table = await self.brokers.runtime_info(master_addr)
                return MasterEndpoints(table["haServerAddr"],
                                       table.get("grpcServerAddr") or None)
            except Exception as exc:
                log.info("master %s not answering yet (%s)", master_addr, exc)
                if attempt + 1 < MASTER_INFO_TRIES:
                    await asyncio.sleep(RETRY_S)
        raise RpcError(f"master {master_addr} did not tell its HA address")

    async def _report_sync_state_set(self, members: set[int]) -> tuple[set[int], int] | None:
        assert self.broker_id is not None
        try:
            body = await self.client.alter_sync_state_set(
                self.config.brokerName, self.broker_id, self.master_epoch, members,
                self.sync_state_set_epoch)
        except ControllerError as exc:
            # Usually a fenced epoch: another master was elected meanwhile (this one
            # hung or was cut off). Ask at once instead of waiting for the next poll.
            log.warning("controller refused SyncStateSet %s: %s", sorted(members), exc)
            asyncio.get_running_loop().create_task(self._apply_latest())
            return None
        self.sync_state_set = set(body.sync_state_set)
        self.sync_state_set_epoch = body.sync_state_set_epoch
        return self.sync_state_set, self.sync_state_set_epoch
