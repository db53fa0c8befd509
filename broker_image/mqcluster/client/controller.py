"""Async client of the controller cluster: finds the active controller and retries there.

``ControllerClient(["127.0.0.1:9878", ...])`` asks any controller for
CONTROLLER_GET_METADATA_INFO to learn the active one, sends leader-only
requests there, and on CONTROLLER_NOT_LEADER or a lost connection looks the
active controller up again and retries until ``retry_timeout`` passes.
Heartbeats go one-way to every controller, as RocketMQ brokers send them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

from mqcluster.protocol.controller import (
    AlterSyncStateSetRequestHeader,
    AlterSyncStateSetResponseHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    BrokerReplicasInfo,
    CleanControllerBrokerDataRequestHeader,
    ControllerResponseCode,
    ElectMasterRequestHeader,
    ElectMasterResponseBody,
    ElectMasterResponseHeader,
    GetMetaDataResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader,
    GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
    RequestCode,
    SyncStateSetBody,
    active_from_remark,
    code_name,
    encode_broker_names,
    request,
)
from mqcluster.protocol.controller_watch import (
    WATCH_MASTERS,
    GroupMaster,
    decode_answer,
    encode_request,
)
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.rpc import RpcClient, RpcError

log = logging.getLogger(__name__)


class ControllerError(Exception):
    """The controller answered with an error code."""

    def __init__(self, code: int, remark: str | None) -> None:
        super().__init__(f"{code_name(code)} ({code}): {remark or ''}")
        self.code = code
        self.remark = remark


class NoActiveControllerError(ControllerError):
    """No controller answered as active before the retry deadline."""

    def __init__(self, remark: str) -> None:
        super().__init__(ControllerResponseCode.CONTROLLER_NOT_LEADER, remark)


def parse_controller_addrs(addrs: str | Iterable[str]) -> list[str]:
    """``"a:1;b:2"`` or a list -> ``["a:1", "b:2"]`` (blank entries dropped)."""
    parts = addrs.replace(",", ";").split(";") if isinstance(addrs, str) else list(addrs)
    return [p.strip() for p in parts if p.strip()]


@dataclass
class ControllerMetadata:
    group: str
    leader_id: str | None
    leader_addr: str | None
    is_leader: bool
    peers: str
    term: int
    self_id: str
    self_addr: str

    @classmethod
    def from_header(cls, h: GetMetaDataResponseHeader) -> ControllerMetadata:
        return cls(
            h.group,
            h.controller_leader_id,
            h.controller_leader_address,
            h.is_leader,
            h.peers,
            h.term,
            h.self_id,
            h.self_address,
        )


@dataclass
class ReplicaInfo:
    """GetReplicaInfo / RegisterBroker / ElectMaster answers in one shape."""

    master_broker_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set: set[int]
    sync_state_set_epoch: int


def _replica_info(
    h: RegisterBrokerToControllerResponseHeader | GetReplicaInfoResponseHeader,
    body: bytes | None,
    set_epoch: int | None = None,
) -> ReplicaInfo:
    """A RegisterBroker / GetReplicaInfo answer as ReplicaInfo: the master from the header,
    the SyncStateSet from the body (empty when there is none); a header's own
    syncStateSetEpoch, when it has one, wins over the body's."""
    ssb = SyncStateSetBody.decode(body) if body else SyncStateSetBody(set(), 0)
    return ReplicaInfo(
        h.master_broker_id,
        h.master_address,
        h.master_epoch or 0,
        ssb.sync_state_set,
        set_epoch or ssb.sync_state_set_epoch,
    )


class ControllerClient:
    def __init__(
        self,
        addrs: str | Iterable[str],
        *,
        rpc: RpcClient | None = None,
        timeout: float = 3.0,
        retry_timeout: float = 10.0,
        retry_interval: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.addrs = parse_controller_addrs(addrs)
        if not self.addrs:
            raise ValueError("no controller address given")
        self._own_rpc = rpc is None
        self.rpc = rpc or RpcClient()
        self.timeout = timeout
        self.retry_timeout = retry_timeout
        self.retry_interval = retry_interval
        self._clock = clock
        self._sleep = sleep
        self.active: str | None = None

    async def close(self) -> None:
        if self._own_rpc:
            await self.rpc.close()

    # ------------------------------------------------------------------ discovery

    async def get_metadata(self, addr: str) -> ControllerMetadata:
        resp = await self.rpc.invoke(
            addr, request(RequestCode.CONTROLLER_GET_METADATA_INFO), self.timeout
        )
        _check(resp)
        return ControllerMetadata.from_header(GetMetaDataResponseHeader.from_command(resp))

    async def find_active(self) -> str:
        """Ask every controller in turn; the first that names an active controller wins."""
        last_error = "no controller reachable"
        for addr in self.addrs:
            try:
                meta = await self.get_metadata(addr)
            except (RpcError, ControllerError, ValueError) as exc:
                last_error = f"{addr}: {exc}"
                continue
            if meta.is_leader:
                self.active = addr
                return addr
            if meta.leader_addr:
                self.active = meta.leader_addr
                return meta.leader_addr
            last_error = f"{addr}: no active controller known"
        raise NoActiveControllerError(last_error)

    # ------------------------------------------------------------------ invoke

    async def invoke_active(self, make: Callable[[], RemotingCommand]) -> RemotingCommand:
        """Send to the active controller, following CONTROLLER_NOT_LEADER until the deadline.

        Returns the first response that is not CONTROLLER_NOT_LEADER (error codes included).
        """
        deadline = self._clock() + self.retry_timeout
        last = "no attempt"
        while True:
            addr = self.active
            if addr is None:
                with contextlib.suppress(NoActiveControllerError):
                    addr = await self.find_active()
            if addr is not None:
                try:
                    resp = await self.rpc.invoke(addr, make(), self.timeout)
                except RpcError as exc:
                    last = f"{addr}: {exc}"
                    self.active = None
                else:
                    if resp.code != ControllerResponseCode.CONTROLLER_NOT_LEADER:
                        return resp
                    last = f"{addr}: {resp.remark}"
                    hint = active_from_remark(resp.remark)
                    self.active = hint if hint and hint != addr else None
                    if self.active is not None:
                        continue
            if self._clock() >= deadline:
                raise NoActiveControllerError(f"no active controller: {last}")
            await self._sleep(self.retry_interval)

    async def _call(self, make: Callable[[], RemotingCommand]) -> RemotingCommand:
        resp = await self.invoke_active(make)
        _check(resp)
        return resp

    # ------------------------------------------------------------------ broker API

    async def heartbeat(self, header: BrokerHeartbeatRequestHeader, *, oneway: bool = True) -> int:
        """BROKER_HEARTBEAT to every controller; returns how many took it.

        One-way by default, as RocketMQ brokers send it; ``oneway=False`` waits
        for each controller's answer (tests use it to know the beat was recorded).
        Unreachable controllers are skipped.
        """
        delivered = 0
        for addr in self.addrs:
            cmd = request(RequestCode.BROKER_HEARTBEAT, header)
            try:
                if oneway:
                    await self.rpc.send_oneway(addr, cmd)
                else:
                    resp = await self.rpc.invoke(addr, cmd, self.timeout)
                    if resp.code != ControllerResponseCode.SUCCESS:
                        continue
            except RpcError:
                continue
            delivered += 1
        return delivered

    async def get_next_broker_id(self, cluster: str, broker_name: str) -> int:
        resp = await self._call(
            lambda: request(
                RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                GetNextBrokerIdRequestHeader(cluster_name=cluster, broker_name=broker_name),
            )
        )
        return GetNextBrokerIdResponseHeader.from_command(resp).next_broker_id

    async def apply_broker_id(
        self, cluster: str, broker_name: str, broker_id: int, register_check_code: str
    ) -> None:
        await self._call(
            lambda: request(
                RequestCode.CONTROLLER_APPLY_BROKER_ID,
                ApplyBrokerIdRequestHeader(
                    cluster_name=cluster, broker_name=broker_name, applied_broker_id=broker_id,
                    register_check_code=register_check_code),
            )
        )

    async def register_broker(
        self, cluster: str, broker_name: str, broker_id: int, broker_addr: str
    ) -> ReplicaInfo:
        resp = await self._call(
            lambda: request(
                RequestCode.CONTROLLER_REGISTER_BROKER,
                RegisterBrokerToControllerRequestHeader(
                    cluster_name=cluster, broker_name=broker_name, broker_id=broker_id,
                    broker_address=broker_addr, invoke_time=_now_ms()),
            )
        )
        h = RegisterBrokerToControllerResponseHeader.from_command(resp)
        return _replica_info(h, resp.body, h.sync_state_set_epoch)

    async def get_replica_info(self, broker_name: str) -> ReplicaInfo:
        resp = await self._call(
            lambda: request(
                RequestCode.CONTROLLER_GET_REPLICA_INFO, GetReplicaInfoRequestHeader(
                    broker_name=broker_name)
            )
        )
        return _replica_info(GetReplicaInfoResponseHeader.from_command(resp), resp.body)

    async def alter_sync_state_set(
        self,
        broker_name: str,
        master_broker_id: int,
        master_epoch: int,
        sync_state_set: set[int],
        sync_state_set_epoch: int,
    ) -> SyncStateSetBody:
        """Returns the new SyncStateSet with its new epoch."""
        body = SyncStateSetBody(set(sync_state_set), sync_state_set_epoch).encode()
        resp = await self._call(
            lambda: request(
                RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
                AlterSyncStateSetRequestHeader(
                    broker_name=broker_name, master_broker_id=master_broker_id,
                    master_epoch=master_epoch, invoke_time=_now_ms()),
                body,
            )
        )
        new_epoch = AlterSyncStateSetResponseHeader.from_command(resp).new_sync_state_set_epoch
        if resp.body:
            result = SyncStateSetBody.decode(resp.body)
            result.sync_state_set_epoch = new_epoch
            return result
        return SyncStateSetBody(set(sync_state_set), new_epoch)

    async def elect_master(
        self,
        cluster: str,
        broker_name: str,
        broker_id: int | None = None,
        *,
        designate: bool = False,
    ) -> tuple[ElectMasterResponseHeader, ElectMasterResponseBody | None]:
        """ElectMaster; ``designate=True`` with ``broker_id`` is the admin-named election."""
        resp = await self._call(
            lambda: request(
                RequestCode.CONTROLLER_ELECT_MASTER,
                ElectMasterRequestHeader(
                    cluster_name=cluster, broker_name=broker_name, broker_id=broker_id,
                    designate_elect=designate, invoke_time=_now_ms()),
            )
        )
        body = ElectMasterResponseBody.decode(resp.body) if resp.body else None
        return ElectMasterResponseHeader.from_command(resp), body

    async def get_sync_state_data(self, broker_names: list[str]) -> BrokerReplicasInfo:
        resp = await self._call(
            lambda: request(
                RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
                None,
                encode_broker_names(broker_names),
            )
        )
        return BrokerReplicasInfo.decode(resp.body)

    async def clean_broker_data(
        self,
        cluster: str | None,
        broker_name: str,
        broker_ids: Iterable[int] | None = None,
        *,
        clean_living_broker: bool = False,
    ) -> None:
        ids = ";".join(str(i) for i in broker_ids) if broker_ids is not None else None
        await self._call(
            lambda: request(
                RequestCode.CLEAN_BROKER_DATA,
                CleanControllerBrokerDataRequestHeader(
                    cluster_name=cluster, broker_name=broker_name,
                    broker_controller_ids_to_clean=ids, is_clean_living_broker=clean_living_broker,
                    invoke_time=_now_ms()),
            )
        )

    async def watch_masters(self, known: Mapping[str, int], wait_ms: int) -> dict[str, GroupMaster]:
        """WATCH_MASTERS on the active controller: every group's master, answered once one
        differs from ``known`` (or after ``wait_ms``). ControllerError when refused
        (REQUEST_CODE_NOT_SUPPORTED from a controller that predates it)."""
        body = encode_request(known, wait_ms)
        resp = await self._call(lambda: RemotingCommand(code=WATCH_MASTERS, body=body))
        return decode_answer(resp.body)


def _check(resp: RemotingCommand) -> None:
    if resp.code != ControllerResponseCode.SUCCESS:
        raise ControllerError(resp.code, resp.remark)


def _now_ms() -> int:
    return int(time.time() * 1000)
