"""ControllerService: the controller's request handlers, failure detection and notifications.

Standalone (``mqcontroller``) or embedded (the name server with
``enableControllerInNamesrv=true``): construct it with a ControllerConfig and
``await start()``; ``await stop()`` releases everything. It serves brokers,
admin tools and its Raft peers on its own ``controllerDLegerPeers`` address;
``register_handlers(registry)`` also serves the controller API on another
registry (e.g. the name server's port).

Writes are validated by the pure ReplicasInfoManager against the applied
state, proposed through consensus and answered once applied. Requests for one
broker group are serialised (validate, propose, apply); different groups run
concurrently, which keeps the pipeline to Raft full. A new active controller
first commits an empty batch, so it validates against everything committed
before its term.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

from mqcluster.client.broker_api import BrokerApi
from mqcluster.common.wallclock import wall_ms
from mqcluster.controller import watch
from mqcluster.controller.config import ControllerConfig, format_peers
from mqcluster.controller.consensus import Consensus, ConsensusError, NotLeader
from mqcluster.controller.events import ElectMasterEvent, Event, encode_events
from mqcluster.controller.heartbeat import HeartbeatTable
from mqcluster.controller.manager import ControllerResult, Liveness, ReplicasInfoManager
from mqcluster.controller.metrics import ControllerMetrics, MetricsServer
from mqcluster.controller.replicated import ControllerStateMachine
from mqcluster.controller.statemachine import ControllerState
from mqcluster.protocol import controller_watch
from mqcluster.protocol.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    GetMetaDataResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetReplicaInfoRequestHeader,
    NotifyBrokerRoleChangedRequestHeader,
    ProtocolError,
    RegisterBrokerToControllerRequestHeader,
    RequestCode,
    SyncStateSetBody,
    code_name,
    decode_broker_names,
    not_leader_remark,
    request_name,
    response,
)
from mqcluster.protocol.controller import ControllerResponseCode as Code
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.header import HeaderError
from mqcluster.wire.rpc import (
    Connection,
    HandlerRegistry,
    RpcClient,
    RpcError,
    RpcServer,
    split_addr,
)

log = logging.getLogger(__name__)

ConsensusFactory = Callable[[ControllerStateMachine, HandlerRegistry], Consensus]
RawHandler = Callable[[RemotingCommand, Connection], Awaitable[RemotingCommand | None]]


def _bind_host(host: str) -> str:
    """Bind an IP literal as given; a DNS name (a pod's stable name) on every interface."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return "0.0.0.0"
    return host


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass
class ElectionRecord:
    broker_name: str
    trigger: str
    result: str
    old_master: int | None
    new_master: int | None
    master_epoch: int
    last_heartbeat_wall_ms: int | None
    detected_wall_ms: int
    applied_wall_ms: int

    @property
    def detection_ms(self) -> int | None:
        if self.last_heartbeat_wall_ms is None:
            return None
        return self.detected_wall_ms - self.last_heartbeat_wall_ms

    @property
    def consensus_ms(self) -> int:
        return self.applied_wall_ms - self.detected_wall_ms

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["detection_ms"] = self.detection_ms
        out["consensus_ms"] = self.consensus_ms
        return out


class ControllerService:
    def __init__(
        self,
        config: ControllerConfig,
        *,
        consensus_factory: ConsensusFactory | None = None,
        clock_ms: Callable[[], int] = _monotonic_ms,
        wall_ms: Callable[[], int] = wall_ms,
        run_scanner: bool = True,
    ) -> None:
        self.config = config
        self.self_id = config.controllerDLegerSelfId
        self.self_addr = config.self_addr
        self.peers = config.peers
        self.clock_ms = clock_ms
        self.wall_ms = wall_ms
        self.run_scanner = run_scanner
        self.state = ControllerState()
        self.sm = ControllerStateMachine(self.state, on_applied=self._on_applied)
        self.heartbeats = HeartbeatTable(config.brokerHeartbeatTimeoutMills)
        self.metrics = ControllerMetrics()
        self.metrics.watch_state(self.state)
        self.registry = HandlerRegistry()
        self.registry.on_connection_closed.append(self._on_connection_closed)
        factory = consensus_factory or _default_consensus_factory(config)
        self.consensus: Consensus = factory(self.sm, self.registry)
        host, port = split_addr(self.self_addr)
        self.server = RpcServer(_bind_host(host), port, self.registry,
                                limits=config.server_limits())
        self.notify_rpc = RpcClient(connect_timeout=0.5)
        self.brokers = BrokerApi(self.notify_rpc)
        self.metrics_server: MetricsServer | None = None
        self.recent_elections: deque[ElectionRecord] = deque(maxlen=64)
        self.elections_done = 0
        self._group_locks: dict[str, asyncio.Lock] = {}
        self._ready_term: int | None = None
        self._ready_lock = asyncio.Lock()
        self._was_leader = False
        self._leader_since_ms = 0
        self._known_dead: set[tuple[str, int]] = set()
        self._missing_since: dict[tuple[str, int], int] = {}
        self._last_seen_wall: dict[tuple[str, int], int] = {}
        self._electing: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._scanner: asyncio.Task[None] | None = None
        self._started = False
        self._applied = asyncio.Event()
        self._watchers = 0
        self.register_handlers(self.registry)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        await self.consensus.start()
        await self.server.start()
        if self.config.metricsPromExporterPort:
            self.metrics_server = MetricsServer(
                self.metrics,
                self.health,
                self.config.metricsPromExporterHost,
                self.config.metricsPromExporterPort,
            )
            await self.metrics_server.start()
        if self.run_scanner:
            self._scanner = asyncio.create_task(self._scan_loop())
        self._started = True
        log.info(
            "controller %s serving on %s (group %s, peers %s)",
            self.self_id, self.self_addr, self.config.controllerDLegerGroup,
            format_peers(self.peers),
        )

    async def stop(self) -> None:
        if self._scanner is not None:
            self._scanner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._scanner
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.server.stop()
        await self.consensus.stop()
        await self.notify_rpc.close()
        if self.metrics_server is not None:
            await self.metrics_server.stop()

    def register_handlers(self, registry: HandlerRegistry) -> None:
        table: dict[int, RawHandler] = {
            RequestCode.BROKER_HEARTBEAT: self._heartbeat,
            RequestCode.CONTROLLER_GET_METADATA_INFO: self._get_metadata,
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: self._leader(self._get_next_broker_id),
            RequestCode.CONTROLLER_APPLY_BROKER_ID: self._leader(self._apply_broker_id),
            RequestCode.CONTROLLER_REGISTER_BROKER: self._leader(self._register_broker),
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: self._leader(self._alter_sync_state_set),
            RequestCode.CONTROLLER_ELECT_MASTER: self._leader(self._elect_master),
            RequestCode.CONTROLLER_GET_REPLICA_INFO: self._leader(self._get_replica_info),
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: self._leader(self._get_sync_state_data),
            RequestCode.CLEAN_BROKER_DATA: self._leader(self._clean_broker_data),
            RequestCode.GET_CONTROLLER_CONFIG: self._get_controller_config,
            controller_watch.WATCH_MASTERS: self._leader(self._watch_masters),
        }
        for code, fn in table.items():
            registry.register(code, self._instrument(int(code), fn))
        if registry is not self.registry:
            registry.on_connection_closed.append(self._on_connection_closed)

    # ------------------------------------------------------------------ status

    def is_leader(self) -> bool:
        return self.consensus.is_leader()

    def active_address(self) -> str | None:
        leader = self.consensus.leader_id()
        return self.peers.get(leader) if leader else None

    def role(self) -> str:
        role = getattr(self.consensus, "role", None)
        if callable(role):
            return str(role())
        return "LEADER" if self.is_leader() else "FOLLOWER"

    def health(self) -> dict[str, Any]:
        self._observe_role(update_metrics=True)
        return {
            "selfId": self.self_id,
            "selfAddress": self.self_addr,
            "group": self.config.controllerDLegerGroup,
            "role": self.role(),
            "isLeader": self.is_leader(),
            "term": self.consensus.term(),
            "activeController": self.active_address(),
            "brokerGroups": len(self.state.replica_info_table),
            "brokersAlive": self.heartbeats.alive_count(self.clock_ms()),
            "appliedEvents": self.state.applied_events,
            "stateDigest": hashlib.sha256(self.state.snapshot()).hexdigest(),
            "recentElections": [r.to_json() for r in self.recent_elections],
        }

    def _observe_role(self, *, update_metrics: bool = False) -> None:
        leader = self.is_leader()
        if leader != self._was_leader:
            if leader:
                self._leader_since_ms = self.clock_ms()
                log.info(
                    "controller %s is now active (term %s)", self.self_id, self.consensus.term()
                )
            self._was_leader = leader
            update_metrics = True
        if update_metrics:
            self.metrics.set_role(self.role(), self.consensus.term(), leader)

    # ------------------------------------------------------------------ plumbing

    def _instrument(self, code: int, fn: RawHandler) -> RawHandler:
        name = request_name(code)
        counters: dict[int, Any] = {}

        async def handler(cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
            try:
                resp = await fn(cmd, conn)
            except (ProtocolError, HeaderError) as exc:
                resp = response(cmd, Code.CONTROLLER_INVALID_REQUEST, str(exc))
            if resp is not None:
                counter = counters.get(resp.code)
                if counter is None:
                    counter = self.metrics.requests.labels(code=name, result=code_name(resp.code))
                    counters[resp.code] = counter
                counter.inc()
            return resp

        return handler

    def _leader(self, fn: RawHandler) -> RawHandler:
        async def handler(cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
            self._observe_role()
            if not self.is_leader():
                return self._not_leader(cmd)
            try:
                await self._ensure_ready()
                return await fn(cmd, conn)
            except NotLeader:
                return self._not_leader(cmd)
            except TimeoutError:
                return response(
                    cmd, Code.SYSTEM_ERROR, "timed out waiting for the controller log to commit"
                )
            except ConsensusError as exc:
                return response(cmd, Code.SYSTEM_ERROR, f"controller log: {exc}")

        return handler

    def _not_leader(self, cmd: RemotingCommand) -> RemotingCommand:
        return response(cmd, Code.CONTROLLER_NOT_LEADER, not_leader_remark(self.active_address()))

    def _manager(self) -> ReplicasInfoManager:
        return ReplicasInfoManager(
            self.state, enable_elect_unclean_master=self.config.enableElectUncleanMaster
        )

    def _liveness(self) -> Liveness:
        return self.heartbeats.view(self.clock_ms())

    async def _propose(self, events: list[Event]) -> None:
        """Returns once applied here; the consensus layer bounds the wait."""
        data = encode_events(events)
        self.sm.remember(data, events)
        try:
            await self.consensus.propose(data)
        finally:
            self.sm.forget(data)

    async def _ensure_ready(self) -> None:
        """On a new term, commit an empty batch so every earlier entry is applied here."""
        if self._ready_term == self.consensus.term():
            return
        async with self._ready_lock:
            term = self.consensus.term()
            if self._ready_term == term:
                return
            await self._propose([])
            self._ready_term = term

    async def _commit(
        self, group: str, build: Callable[[ReplicasInfoManager, Liveness], ControllerResult]
    ) -> ControllerResult:
        await self._ensure_ready()
        lock = self._group_locks.setdefault(group, asyncio.Lock())
        async with lock:
            if not self.is_leader():
                raise NotLeader(self.consensus.leader_id())
            result = build(self._manager(), self._liveness())
            if result.events:
                await self._propose(result.events)
            return result

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    def _answer(cmd: RemotingCommand, result: ControllerResult) -> RemotingCommand:
        return response(cmd, result.code, result.remark, result.header, result.body)

    # ------------------------------------------------------------------ handlers

    async def _heartbeat(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        h = BrokerHeartbeatRequestHeader.from_command(cmd)
        info = self.heartbeats.on_heartbeat(h, self.clock_ms(), conn)
        if info is not None:
            key = (info.broker_name, info.broker_id)
            self._known_dead.discard(key)
            self._missing_since.pop(key, None)
            self._last_seen_wall[key] = self.wall_ms()
            if self.is_leader() and self._group_lacks_master(info.broker_name):
                self._trigger_election(info.broker_name, "heartbeat")
        return response(cmd)

    async def _get_metadata(self, cmd: RemotingCommand, _conn: Connection) -> RemotingCommand:
        self._observe_role()
        header = GetMetaDataResponseHeader(
            group=self.config.controllerDLegerGroup,
            controller_leader_id=self.consensus.leader_id(),
            controller_leader_address=self.active_address(),
            is_leader=self.is_leader(),
            peers=format_peers(self.peers),
            term=self.consensus.term(),
            self_id=self.self_id,
            self_address=self.self_addr,
        )
        return response(cmd, header=header)

    async def _get_controller_config(
        self, cmd: RemotingCommand, _conn: Connection
    ) -> RemotingCommand:
        lines = [f"{k}={v}" for k, v in self.config.model_dump().items()]
        return response(cmd, body="\n".join(lines).encode())

    async def _get_next_broker_id(self, cmd: RemotingCommand, _c: Connection) -> RemotingCommand:
        h = GetNextBrokerIdRequestHeader.from_command(cmd)
        return self._answer(cmd, self._manager().get_next_broker_id(h))

    async def _apply_broker_id(self, cmd: RemotingCommand, _c: Connection) -> RemotingCommand:
        h = ApplyBrokerIdRequestHeader.from_command(cmd)
        result = await self._commit(h.broker_name, lambda m, _a: m.apply_broker_id(h))
        return self._answer(cmd, result)

    async def _register_broker(self, cmd: RemotingCommand, _c: Connection) -> RemotingCommand:
        h = RegisterBrokerToControllerRequestHeader.from_command(cmd)
        result = await self._commit(h.broker_name, lambda m, a: m.register_broker(h, a))
        return self._answer(cmd, result)

    async def _alter_sync_state_set(
        self, cmd: RemotingCommand, _c: Connection
    ) -> RemotingCommand:
        h = AlterSyncStateSetRequestHeader.from_command(cmd)
        body = SyncStateSetBody.decode(cmd.body)
        result = await self._commit(h.broker_name, lambda m, a: m.alter_sync_state_set(h, body, a))
        return self._answer(cmd, result)

    async def _elect_master(self, cmd: RemotingCommand, _c: Connection) -> RemotingCommand:
        h = ElectMasterRequestHeader.from_command(cmd)
        trigger = "admin" if h.designate_elect else ("broker" if h.broker_id is not None else "api")
        result = await self._elect(h, trigger)
        return self._answer(cmd, result)

    async def _get_replica_info(self, cmd: RemotingCommand, _c: Connection) -> RemotingCommand:
        h = GetReplicaInfoRequestHeader.from_command(cmd)
        return self._answer(cmd, self._manager().get_replica_info(h))

    async def _get_sync_state_data(
        self, cmd: RemotingCommand, _c: Connection
    ) -> RemotingCommand:
        names = decode_broker_names(cmd.body) if cmd.body else []
        if not names:
            names = sorted(self.state.replica_info_table)
        return self._answer(cmd, self._manager().get_sync_state_data(names, self._liveness()))

    async def _watch_masters(self, cmd: RemotingCommand, _c: Connection) -> RemotingCommand:
        """Held until a group's master differs from the caller's view (controller/watch.py)."""
        try:
            known, wait_ms = controller_watch.decode_request(cmd.body)
        except controller_watch.WatchError as exc:
            return response(cmd, Code.INVALID_REQUEST, str(exc))
        if self._watchers >= watch.MAX_WATCHERS:
            return response(cmd, Code.SYSTEM_BUSY, "too many master watches held")
        self._watchers += 1
        try:
            with contextlib.suppress(TimeoutError):
                await self.wait_for(lambda: watch.differs(known, watch.masters_of(self.state)),
                                    wait_ms / 1000)
        finally:
            self._watchers -= 1
        return response(cmd, body=controller_watch.encode_answer(watch.masters_of(self.state)))

    async def _clean_broker_data(self, cmd: RemotingCommand, _c: Connection) -> RemotingCommand:
        h = CleanControllerBrokerDataRequestHeader.from_command(cmd)
        result = await self._commit(h.broker_name, lambda m, a: m.clean_broker_data(h, a))
        return self._answer(cmd, result)

    # ------------------------------------------------------------------ elections

    async def _elect(self, h: ElectMasterRequestHeader, trigger: str) -> ControllerResult:
        sync = self.state.sync_state(h.broker_name)
        old_master = sync.master_broker_id if sync else None
        detected = self.wall_ms()
        result = await self._commit(h.broker_name, lambda m, a: m.elect_master(h, a))
        applied = self.wall_ms()
        self.metrics.elections.labels(trigger=trigger, result=code_name(result.code)).inc()
        if any(isinstance(e, ElectMasterEvent) for e in result.events):
            last_hb = (
                self._last_seen_wall.get((h.broker_name, old_master))
                if old_master is not None
                else None
            )
            header = result.header
            assert isinstance(header, ElectMasterResponseHeader)
            record = ElectionRecord(
                h.broker_name,
                trigger,
                code_name(result.code),
                old_master,
                header.master_broker_id,
                header.master_epoch or 0,
                last_hb if trigger not in ("admin", "broker", "api") else None,
                detected,
                applied,
            )
            if header.master_broker_id is not None and header.master_broker_id != old_master:
                self.metrics.master_changes.labels(cluster=h.cluster_name,
                                                   broker=h.broker_name).inc()
            self.recent_elections.append(record)
            self.elections_done += 1
            self._wake()
            if record.detection_ms is not None:
                self.metrics.detection_seconds.observe(record.detection_ms / 1000)
            self.metrics.consensus_seconds.observe(record.consensus_ms / 1000)
            log.info(
                "elected master %s for %s (epoch %s, trigger %s)",
                header.master_broker_id, h.broker_name, header.master_epoch, trigger,
            )
            if result.ok and self.config.notifyBrokerRoleChanged:
                self._notify_role_changed(h.broker_name)
        return result

    def _master_dead(self, group: str, master: int, now: int) -> bool:
        """Known dead, timed out, or silent for a whole heartbeat timeout since we looked.

        A master this controller never heard from (just elected, or this
        controller just became active) gets one default heartbeat timeout.
        """
        key = (group, master)
        if key in self._known_dead:
            return True
        if self.heartbeats.get(group, master) is not None:
            self._missing_since.pop(key, None)
            return not self.heartbeats.is_alive(group, master, now)
        since = max(self._missing_since.setdefault(key, now), self._leader_since_ms)
        return now - since >= self.config.brokerHeartbeatTimeoutMills

    def _group_lacks_master(self, group: str) -> bool:
        sync = self.state.sync_state(group)
        if sync is None or sync.is_first_time_for_elect():
            return False
        if sync.master_broker_id is None:
            return True
        return self._master_dead(group, sync.master_broker_id, self.clock_ms())

    def _trigger_election(self, group: str, trigger: str) -> None:
        """Start an automatic election for ``group`` unless one is running.

        A group whose master is already cleared is only elected for when an
        eligible replica is alive, so retries never bump the epoch in vain.
        """
        if group in self._electing:
            return
        sync, info = self.state.sync_state(group), self.state.replica(group)
        if sync is None or info is None:
            return
        if sync.master_broker_id is None and not self._manager().needs_election(
            group, self._liveness()
        ):
            return
        self._electing.add(group)
        self._spawn(self._auto_elect(group, info.cluster_name, trigger))

    async def _auto_elect(self, group: str, cluster: str, trigger: str) -> None:
        try:
            await self._elect(ElectMasterRequestHeader(
                cluster_name=cluster, broker_name=group, broker_id=None, designate_elect=False),
                trigger)
        except (NotLeader, TimeoutError, ConsensusError) as exc:
            log.info("automatic election for %s not done: %r", group, exc)
        except Exception:
            log.exception("automatic election for %s failed", group)
        finally:
            self._electing.discard(group)

    def _on_connection_closed(self, conn: Connection) -> None:
        dead = self.heartbeats.pop_connection(conn)
        for info in dead:
            self._known_dead.add((info.broker_name, info.broker_id))
        if not dead or not self.is_leader():
            return
        for info in dead:
            sync = self.state.sync_state(info.broker_name)
            if sync is not None and sync.master_broker_id == info.broker_id:
                log.info(
                    "connection of master %s of %s closed", info.broker_id, info.broker_name
                )
                self._trigger_election(info.broker_name, "channel_closed")

    async def scan_once(self) -> None:
        """Expire silent brokers; on the active controller, elect where a master is gone."""
        self._observe_role(update_metrics=True)
        now = self.clock_ms()
        expired = self.heartbeats.pop_expired(now)
        for info in expired:
            self._known_dead.add((info.broker_name, info.broker_id))
        self.metrics.brokers_alive.set(self.heartbeats.alive_count(now))
        self.metrics.broker_groups.set(len(self.state.replica_info_table))
        if not self.is_leader():
            return
        expired_masters = set()
        for info in expired:
            sync = self.state.sync_state(info.broker_name)
            if sync is not None and sync.master_broker_id == info.broker_id:
                expired_masters.add(info.broker_name)
                self._trigger_election(info.broker_name, "heartbeat_timeout")
        for group in list(self.state.sync_state_set_info_table):
            if group not in expired_masters and self._group_lacks_master(group):
                self._trigger_election(group, "scan")

    async def _scan_loop(self) -> None:
        interval = self.config.scanNotActiveBrokerInterval / 1000
        while True:
            try:
                await self.scan_once()
            except Exception:
                log.exception("scan of not-active brokers failed")
            await asyncio.sleep(interval)

    # ------------------------------------------------------------------ notifications

    async def wait_for(self, condition: Callable[[], bool], timeout: float) -> None:
        """Wait until ``condition()`` holds, re-checked after every applied batch and election."""
        async with asyncio.timeout(timeout):
            while not condition():
                event = self._applied
                await event.wait()

    async def wait_until(
        self, predicate: Callable[[ControllerState], bool], timeout: float
    ) -> None:
        """Wait until ``predicate(state)`` holds."""
        await self.wait_for(lambda: predicate(self.state), timeout)

    def _wake(self) -> None:
        self._applied.set()
        self._applied = asyncio.Event()

    def _on_applied(self, events: list[Event]) -> None:
        self._wake()
        for ev in events:
            if isinstance(ev, ElectMasterEvent) and ev.new_master_broker_id is not None:
                self._known_dead.discard((ev.broker_name, ev.new_master_broker_id))

    def _notify_role_changed(self, group: str) -> None:
        info, sync = self.state.replica(group), self.state.sync_state(group)
        if info is None or sync is None:
            return
        header = NotifyBrokerRoleChangedRequestHeader(
            master_address=info.address_of(sync.master_broker_id),
            master_epoch=sync.master_epoch,
            sync_state_set_epoch=sync.sync_state_set_epoch,
            master_broker_id=sync.master_broker_id)
        body = SyncStateSetBody(set(sync.sync_state_set), sync.sync_state_set_epoch).encode()
        now = self.clock_ms()
        for bid, ident in info.brokers.items():
            if bid != sync.master_broker_id and not self.heartbeats.is_alive(group, bid, now):
                continue
            self._spawn(self._send_notify(ident.address, header, body))

    async def _send_notify(self, addr: str, header: NotifyBrokerRoleChangedRequestHeader,
                           body: bytes) -> None:
        try:
            await self.brokers.notify_role_changed(addr, header, body, timeout=1.0)
        except (RpcError, ValueError) as exc:
            log.info("role-change notification to %s failed: %s", addr, exc)


def _default_consensus_factory(config: ControllerConfig) -> ConsensusFactory:
    def factory(sm: ControllerStateMachine, registry: HandlerRegistry) -> Consensus:
        from mqcluster.controller.raft_consensus import RaftConsensus

        consensus: Consensus = RaftConsensus(config, sm, registry)
        return consensus

    return factory
