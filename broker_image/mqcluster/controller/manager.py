"""Request validation (RocketMQ's ReplicasInfoManager), pure.

Each method reads the state and a liveness view and returns a
``ControllerResult``: the response code, header and body to answer, and the
events to replicate. Nothing here mutates the state; the caller proposes the
events and answers only once they are applied.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from mqcluster.controller import elect_policy
from mqcluster.controller.elect_policy import Candidate
from mqcluster.controller.events import (
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    CleanBrokerDataEvent,
    ElectMasterEvent,
    Event,
    UpdateBrokerAddressEvent,
)
from mqcluster.controller.statemachine import (
    BrokerReplicaInfo,
    ControllerState,
    SyncStateInfo,
    identity_of_check_code,
)
from mqcluster.protocol.controller import (
    FIRST_BROKER_CONTROLLER_ID,
    AlterSyncStateSetRequestHeader,
    AlterSyncStateSetResponseHeader,
    ApplyBrokerIdRequestHeader,
    ApplyBrokerIdResponseHeader,
    BrokerMemberGroup,
    BrokerReplicasInfo,
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseBody,
    ElectMasterResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader,
    GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
    ReplicaIdentity,
    ReplicasInfo,
    SyncStateSetBody,
    parse_id_list,
)
from mqcluster.protocol.controller import ControllerResponseCode as Code
from mqcluster.wire.header import CamelHeader


class Liveness(Protocol):
    def is_alive(self, broker_name: str, broker_id: int) -> bool: ...

    def candidates(self, broker_name: str) -> Mapping[int, Candidate]: ...


@dataclass
class ControllerResult:
    code: int = Code.SUCCESS
    remark: str | None = None
    header: CamelHeader | None = None
    body: bytes = b""
    events: list[Event] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.code == Code.SUCCESS

    def fail(self, code: int, remark: str) -> ControllerResult:
        self.code, self.remark = code, remark
        return self


def _group_missing(name: str) -> ControllerResult:
    return ControllerResult().fail(
        Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
        f"broker-set {name} has not been registered in the controller",
    )


class ReplicasInfoManager:
    def __init__(self, state: ControllerState, *, enable_elect_unclean_master: bool = False):
        self.state = state
        self.enable_elect_unclean_master = enable_elect_unclean_master

    def _group(self, name: str) -> tuple[BrokerReplicaInfo, SyncStateInfo] | None:
        info, sync = self.state.replica(name), self.state.sync_state(name)
        if info is None or sync is None:
            return None
        return info, sync

    # ------------------------------------------------------------------ broker ids

    def get_next_broker_id(self, h: GetNextBrokerIdRequestHeader) -> ControllerResult:
        info = self.state.replica(h.broker_name)
        next_id = info.next_assign_broker_id if info else FIRST_BROKER_CONTROLLER_ID
        return ControllerResult(
            header=GetNextBrokerIdResponseHeader(
                cluster_name=h.cluster_name, broker_name=h.broker_name, next_broker_id=next_id)
        )

    def apply_broker_id(self, h: ApplyBrokerIdRequestHeader) -> ControllerResult:
        """Grant ``applied_broker_id`` to the broker whose identity code is ``register_check_code``.

        Idempotent for the same code (a restarted broker re-applies, possibly from
        a new address); refused when another code already holds the id.
        """
        result = ControllerResult(header=ApplyBrokerIdResponseHeader(
            cluster_name=h.cluster_name, broker_name=h.broker_name))
        address = h.register_check_code.split(";", 1)[0]
        if h.applied_broker_id < FIRST_BROKER_CONTROLLER_ID:
            return result.fail(
                Code.CONTROLLER_BROKER_ID_INVALID,
                f"broker id {h.applied_broker_id} is invalid: ids start at "
                f"{FIRST_BROKER_CONTROLLER_ID}",
            )
        event = ApplyBrokerIdEvent(
            h.cluster_name, h.broker_name, address, h.applied_broker_id, h.register_check_code
        )
        info = self.state.replica(h.broker_name)
        if info is None:
            if h.applied_broker_id != FIRST_BROKER_CONTROLLER_ID:
                return result.fail(
                    Code.CONTROLLER_BROKER_ID_INVALID,
                    f"broker-set {h.broker_name} has not been registered in the controller, "
                    f"but the broker tries to apply broker id {h.applied_broker_id}",
                )
            result.events.append(event)
            return result
        if info.cluster_name != h.cluster_name:
            return result.fail(
                Code.CONTROLLER_BROKER_ID_INVALID,
                f"broker-set {h.broker_name} belongs to cluster {info.cluster_name}, "
                f"not {h.cluster_name}",
            )
        held = info.check_code_of(h.applied_broker_id)
        if held is None:
            result.events.append(event)
            return result
        if identity_of_check_code(held) == identity_of_check_code(h.register_check_code):
            if held != h.register_check_code:
                result.events.append(event)
            return result
        return result.fail(
            Code.CONTROLLER_BROKER_ID_INVALID,
            f"failed to apply broker id {h.applied_broker_id} in broker-set {h.broker_name}: "
            "it is held by another broker",
        )

    # ------------------------------------------------------------------ register

    def register_broker(
        self, h: RegisterBrokerToControllerRequestHeader, alive: Liveness
    ) -> ControllerResult:
        group = self._group(h.broker_name)
        if group is None:
            return _group_missing(h.broker_name)
        info, sync = group
        if not info.is_broker_exist(h.broker_id):
            return ControllerResult().fail(
                Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                f"broker id {h.broker_id} has not been registered in broker-set {h.broker_name}",
            )
        header = RegisterBrokerToControllerResponseHeader(
            cluster_name=h.cluster_name, broker_name=h.broker_name)
        master = sync.master_broker_id
        if master is not None and (master == h.broker_id or alive.is_alive(h.broker_name, master)):
            header.master_broker_id = master
            header.master_address = (
                h.broker_address if master == h.broker_id else info.address_of(master)
            )
            header.master_epoch = sync.master_epoch
            header.sync_state_set_epoch = sync.sync_state_set_epoch
        result = ControllerResult(
            header=header,
            body=SyncStateSetBody(set(sync.sync_state_set), sync.sync_state_set_epoch).encode(),
        )
        if info.address_of(h.broker_id) != h.broker_address:
            result.events.append(
                UpdateBrokerAddressEvent(
                    h.cluster_name, h.broker_name, h.broker_address, h.broker_id
                )
            )
        return result

    # ------------------------------------------------------------------ elect

    def elect_master(self, h: ElectMasterRequestHeader, alive: Liveness) -> ControllerResult:
        """ElectMaster. ``broker_id`` None means the controller itself asks (a dead master)."""
        group = self._group(h.broker_name)
        if group is None:
            return _group_missing(h.broker_name)
        info, sync = group
        old_master = sync.master_broker_id
        designated = h.broker_id if h.designate_elect else None
        if designated is not None and not info.is_broker_exist(designated):
            return ControllerResult(header=ElectMasterResponseHeader()).fail(
                Code.CONTROLLER_ELECT_MASTER_FAILED,
                f"broker id {designated} is not a replica of broker-set {h.broker_name}",
            )
        new_master: int | None = None
        first = sync.is_first_time_for_elect()
        if first and h.broker_id is not None and info.is_broker_exist(h.broker_id):
            new_master = h.broker_id
        if new_master is None:
            new_master = elect_policy.elect(
                sync.sync_state_set,
                info.all_broker_ids() if self.enable_elect_unclean_master else None,
                alive.candidates(h.broker_name),
                old_master,
                designated,
            )
        if new_master is not None and new_master == old_master:
            header = ElectMasterResponseHeader(
                master_broker_id=old_master, master_address=info.address_of(old_master),
                master_epoch=sync.master_epoch,
                sync_state_set_epoch=sync.sync_state_set_epoch)
            return ControllerResult(
                header=header,
                body=ElectMasterResponseBody(
                    _member_group(info), set(sync.sync_state_set)
                ).encode(),
            ).fail(
                Code.CONTROLLER_MASTER_STILL_EXIST,
                f"the old master {old_master} of {h.broker_name} is still alive, "
                "no need to elect a new master",
            )
        if new_master is not None:
            header = ElectMasterResponseHeader(
                master_broker_id=new_master,
                master_address=info.address_of(new_master),
                master_epoch=sync.master_epoch + 1,
                sync_state_set_epoch=sync.sync_state_set_epoch + 1)
            return ControllerResult(
                header=header,
                body=ElectMasterResponseBody(_member_group(info), {new_master}).encode(),
                events=[ElectMasterEvent(h.broker_name, new_master)],
            )
        header = ElectMasterResponseHeader(
            master_broker_id=None, master_address=None, master_epoch=sync.master_epoch,
            sync_state_set_epoch=sync.sync_state_set_epoch)
        if h.broker_id is None:
            if old_master is None and not sync.is_first_time_for_elect():
                return ControllerResult(header=header).fail(
                    Code.CONTROLLER_MASTER_NOT_AVAILABLE,
                    f"broker-set {h.broker_name} has no master and no eligible replica",
                )
            header.master_epoch = sync.master_epoch + 1
            return ControllerResult(
                header=header, events=[ElectMasterEvent(h.broker_name, None)]
            ).fail(
                Code.CONTROLLER_MASTER_NOT_AVAILABLE,
                f"the old master of {h.broker_name} is down and no new master could be elected",
            )
        return ControllerResult(header=header).fail(
            Code.CONTROLLER_ELECT_MASTER_FAILED,
            f"failed to elect a new master for {h.broker_name}: no eligible replica",
        )

    def needs_election(self, broker_name: str, alive: Liveness) -> bool:
        """The group lost its master (or never had one alive) and has an eligible replica."""
        group = self._group(broker_name)
        if group is None:
            return False
        info, sync = group
        if sync.is_first_time_for_elect():
            return False
        if sync.master_broker_id is not None and alive.is_alive(
            broker_name, sync.master_broker_id
        ):
            return False
        pool = info.all_broker_ids() if self.enable_elect_unclean_master else sync.sync_state_set
        cands = alive.candidates(broker_name)
        return any(b in cands for b in pool)

    # ------------------------------------------------------------------ alter

    def alter_sync_state_set(
        self, h: AlterSyncStateSetRequestHeader, body: SyncStateSetBody, alive: Liveness
    ) -> ControllerResult:
        result = ControllerResult(header=AlterSyncStateSetResponseHeader(
            new_sync_state_set_epoch=0))
        group = self._group(h.broker_name)
        if group is None:
            return result.fail(
                Code.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                f"broker-set {h.broker_name} metadata does not exist",
            )
        info, sync = group
        new_set = set(body.sync_state_set)
        # RocketMQ's order: an unchanged set is answered before any other check.
        if new_set == sync.sync_state_set:
            return result.fail(
                Code.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                "the new syncStateSet equals the current one, nothing to update",
            )
        if sync.master_broker_id is None or sync.master_broker_id != h.master_broker_id:
            return result.fail(
                Code.CONTROLLER_INVALID_MASTER,
                "rejecting alter syncStateSet request: the current master is "
                f"{sync.master_broker_id}, not {h.master_broker_id}",
            )
        if h.master_epoch != sync.master_epoch:
            return result.fail(
                Code.CONTROLLER_FENCED_MASTER_EPOCH,
                "rejecting alter syncStateSet request: the current master epoch is "
                f"{sync.master_epoch}, not {h.master_epoch}",
            )
        if body.sync_state_set_epoch != sync.sync_state_set_epoch:
            return result.fail(
                Code.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                "rejecting alter syncStateSet request: the current syncStateSet epoch is "
                f"{sync.sync_state_set_epoch}, not {body.sync_state_set_epoch}",
            )
        for replica in sorted(new_set):
            if not info.is_broker_exist(replica):
                return result.fail(
                    Code.CONTROLLER_INVALID_REPLICAS,
                    f"rejecting alter syncStateSet request: replica {replica} does not exist",
                )
            if not alive.is_alive(h.broker_name, replica):
                return result.fail(
                    Code.CONTROLLER_BROKER_NOT_ALIVE,
                    f"rejecting alter syncStateSet request: replica {replica} is not alive",
                )
        if sync.master_broker_id not in new_set:
            return result.fail(
                Code.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                "rejecting alter syncStateSet request: the new syncStateSet does not contain "
                f"the master {sync.master_broker_id}",
            )
        epoch = sync.sync_state_set_epoch + 1
        result.header = AlterSyncStateSetResponseHeader(new_sync_state_set_epoch=epoch)
        result.body = SyncStateSetBody(new_set, epoch).encode()
        result.events.append(AlterSyncStateSetEvent(h.broker_name, frozenset(new_set)))
        return result

    # ------------------------------------------------------------------ reads

    def get_replica_info(self, h: GetReplicaInfoRequestHeader) -> ControllerResult:
        group = self._group(h.broker_name)
        if group is None:
            return ControllerResult().fail(
                Code.CONTROLLER_BROKER_METADATA_NOT_EXIST,
                f"broker-set {h.broker_name} metadata does not exist",
            )
        info, sync = group
        return ControllerResult(
            header=GetReplicaInfoResponseHeader(
                master_broker_id=sync.master_broker_id,
                master_address=info.address_of(sync.master_broker_id),
                master_epoch=sync.master_epoch),
            body=SyncStateSetBody(set(sync.sync_state_set), sync.sync_state_set_epoch).encode(),
        )

    def get_sync_state_data(self, names: list[str], alive: Liveness) -> ControllerResult:
        table: dict[str, ReplicasInfo] = {}
        for name in names:
            group = self._group(name)
            if group is None:
                continue
            info, sync = group
            in_sync: list[ReplicaIdentity] = []
            not_in_sync: list[ReplicaIdentity] = []
            for bid, ident in sorted(info.brokers.items()):
                rid = ReplicaIdentity(name, bid, ident.address, alive.is_alive(name, bid))
                (in_sync if bid in sync.sync_state_set else not_in_sync).append(rid)
            table[name] = ReplicasInfo(
                sync.master_broker_id,
                info.address_of(sync.master_broker_id),
                sync.master_epoch,
                sync.sync_state_set_epoch,
                in_sync,
                not_in_sync,
            )
        return ControllerResult(body=BrokerReplicasInfo(table).encode())

    # ------------------------------------------------------------------ clean

    def clean_broker_data(
        self, h: CleanControllerBrokerDataRequestHeader, alive: Liveness
    ) -> ControllerResult:
        group = self._group(h.broker_name)
        if group is None:
            return ControllerResult().fail(
                Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                f"broker-set {h.broker_name} metadata does not exist",
            )
        info, _ = group
        ids = parse_id_list(h.broker_controller_ids_to_clean)
        targets = set(ids) if ids else info.all_broker_ids()
        if not h.is_clean_living_broker:
            living = sorted(b for b in targets if alive.is_alive(h.broker_name, b))
            if living:
                return ControllerResult().fail(
                    Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                    f"brokers {living} of {h.broker_name} are still alive; "
                    "set isCleanLivingBroker to clean them",
                )
        return ControllerResult(
            events=[CleanBrokerDataEvent(h.broker_name, frozenset(ids) if ids else None)]
        )


def _member_group(info: BrokerReplicaInfo) -> BrokerMemberGroup:
    return BrokerMemberGroup(
        info.cluster_name,
        info.broker_name,
        {bid: ident.address for bid, ident in info.brokers.items()},
    )
