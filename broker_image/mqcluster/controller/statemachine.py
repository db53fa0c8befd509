"""The replicated controller state: ``replicaInfoTable`` and ``syncStateSetInfoTable``.

Pure: ``apply(event)`` mutates the tables deterministically, ``snapshot()`` /
``restore()`` serialise all of it. Every controller applies the same events in
the same order and so holds the same state. Validation happens before an
event is proposed (see ``manager``); ``apply`` only guards against events
that no longer make sense, never raising, so a log always replays.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from mqcluster.controller.events import (
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    CleanBrokerDataEvent,
    ElectMasterEvent,
    Event,
    UpdateBrokerAddressEvent,
)
from mqcluster.protocol.controller import FIRST_BROKER_CONTROLLER_ID


def identity_of_check_code(check_code: str) -> str:
    """The part of a register check code (``address;code``) that names the broker itself."""
    return check_code.split(";", 1)[1] if ";" in check_code else check_code


@dataclass
class BrokerIdentity:
    address: str
    register_check_code: str


@dataclass
class BrokerReplicaInfo:
    """One broker group: its cluster, its replicas by id, and the next id to hand out."""

    cluster_name: str
    broker_name: str
    next_assign_broker_id: int = FIRST_BROKER_CONTROLLER_ID
    brokers: dict[int, BrokerIdentity] = field(default_factory=dict)

    def is_broker_exist(self, broker_id: int) -> bool:
        return broker_id in self.brokers

    def address_of(self, broker_id: int | None) -> str | None:
        if broker_id is None:
            return None
        ident = self.brokers.get(broker_id)
        return ident.address if ident else None

    def id_of(self, address: str) -> int | None:
        for bid, ident in self.brokers.items():
            if ident.address == address:
                return bid
        return None

    def check_code_of(self, broker_id: int) -> str | None:
        ident = self.brokers.get(broker_id)
        return ident.register_check_code if ident else None

    def all_broker_ids(self) -> set[int]:
        return set(self.brokers)

    def broker_id_table(self) -> dict[str, int]:
        """Address -> broker id, as RocketMQ's ``brokerIdTable``."""
        return {ident.address: bid for bid, ident in self.brokers.items()}


@dataclass
class SyncStateInfo:
    """The master and SyncStateSet of one broker group, with their epochs."""

    cluster_name: str
    broker_name: str
    master_broker_id: int | None = None
    master_epoch: int = 0
    sync_state_set: set[int] = field(default_factory=set)
    sync_state_set_epoch: int = 0

    def is_first_time_for_elect(self) -> bool:
        return self.master_epoch == 0

    def is_master_exist(self) -> bool:
        return self.master_broker_id is not None

    def update_master(self, master: int | None) -> None:
        self.master_broker_id = master
        self.master_epoch += 1

    def update_sync_state_set(self, members: set[int]) -> None:
        self.sync_state_set = set(members)
        self.sync_state_set_epoch += 1


class ControllerState:
    """Both tables, keyed by broker name."""

    def __init__(self) -> None:
        self.replica_info_table: dict[str, BrokerReplicaInfo] = {}
        self.sync_state_set_info_table: dict[str, SyncStateInfo] = {}
        self.applied_events = 0

    # ------------------------------------------------------------------ queries

    def contains(self, broker_name: str) -> bool:
        return (
            broker_name in self.replica_info_table
            and broker_name in self.sync_state_set_info_table
        )

    def replica(self, broker_name: str) -> BrokerReplicaInfo | None:
        return self.replica_info_table.get(broker_name)

    def sync_state(self, broker_name: str) -> SyncStateInfo | None:
        return self.sync_state_set_info_table.get(broker_name)

    def master_address(self, broker_name: str) -> str | None:
        info, sync = self.replica(broker_name), self.sync_state(broker_name)
        if info is None or sync is None:
            return None
        return info.address_of(sync.master_broker_id)

    def copy(self) -> ControllerState:
        return copy.deepcopy(self)

    # ------------------------------------------------------------------ apply

    def apply(self, event: Event) -> None:
        self.applied_events += 1
        if isinstance(event, ApplyBrokerIdEvent):
            self._apply_broker_id(event)
        elif isinstance(event, UpdateBrokerAddressEvent):
            self._update_broker_address(event)
        elif isinstance(event, ElectMasterEvent):
            self._elect_master(event)
        elif isinstance(event, AlterSyncStateSetEvent):
            self._alter_sync_state_set(event)
        else:
            self._clean_broker_data(event)

    def apply_all(self, events: list[Event]) -> None:
        for ev in events:
            self.apply(ev)

    def _apply_broker_id(self, ev: ApplyBrokerIdEvent) -> None:
        info = self.replica_info_table.get(ev.broker_name)
        if info is None:
            info = BrokerReplicaInfo(ev.cluster_name, ev.broker_name)
            self.replica_info_table[ev.broker_name] = info
            self.sync_state_set_info_table[ev.broker_name] = SyncStateInfo(
                ev.cluster_name, ev.broker_name
            )
        existing = info.brokers.get(ev.broker_id)
        if existing is not None and identity_of_check_code(
            existing.register_check_code
        ) != identity_of_check_code(ev.register_check_code):
            return
        info.brokers[ev.broker_id] = BrokerIdentity(ev.broker_address, ev.register_check_code)
        info.next_assign_broker_id = max(info.next_assign_broker_id, ev.broker_id + 1)

    def _update_broker_address(self, ev: UpdateBrokerAddressEvent) -> None:
        info = self.replica_info_table.get(ev.broker_name)
        if info is None or ev.broker_id not in info.brokers:
            return
        info.brokers[ev.broker_id].address = ev.broker_address

    def _elect_master(self, ev: ElectMasterEvent) -> None:
        sync = self.sync_state_set_info_table.get(ev.broker_name)
        if sync is None:
            return
        if ev.new_master_broker_id is not None:
            sync.update_master(ev.new_master_broker_id)
            sync.update_sync_state_set({ev.new_master_broker_id})
        else:
            sync.update_master(None)

    def _alter_sync_state_set(self, ev: AlterSyncStateSetEvent) -> None:
        sync = self.sync_state_set_info_table.get(ev.broker_name)
        if sync is None:
            return
        sync.update_sync_state_set(set(ev.new_sync_state_set))

    def _clean_broker_data(self, ev: CleanBrokerDataEvent) -> None:
        if ev.broker_ids_to_clean is None:
            self.replica_info_table.pop(ev.broker_name, None)
            self.sync_state_set_info_table.pop(ev.broker_name, None)
            return
        info = self.replica_info_table.get(ev.broker_name)
        sync = self.sync_state_set_info_table.get(ev.broker_name)
        if info is None or sync is None:
            return
        for bid in ev.broker_ids_to_clean:
            info.brokers.pop(bid, None)
            sync.sync_state_set.discard(bid)
            if sync.master_broker_id == bid:
                sync.master_broker_id = None
        if not info.brokers:
            self.replica_info_table.pop(ev.broker_name, None)
            self.sync_state_set_info_table.pop(ev.broker_name, None)

    # ------------------------------------------------------------------ snapshot

    def to_json(self) -> dict[str, Any]:
        return {
            "replicaInfoTable": {
                name: {
                    "clusterName": info.cluster_name,
                    "brokerName": info.broker_name,
                    "nextAssignBrokerId": info.next_assign_broker_id,
                    "brokers": {
                        str(bid): {
                            "address": ident.address,
                            "registerCheckCode": ident.register_check_code,
                        }
                        for bid, ident in sorted(info.brokers.items())
                    },
                }
                for name, info in sorted(self.replica_info_table.items())
            },
            "syncStateSetInfoTable": {
                name: {
                    "clusterName": s.cluster_name,
                    "brokerName": s.broker_name,
                    "masterBrokerId": s.master_broker_id,
                    "masterEpoch": s.master_epoch,
                    "syncStateSet": sorted(s.sync_state_set),
                    "syncStateSetEpoch": s.sync_state_set_epoch,
                }
                for name, s in sorted(self.sync_state_set_info_table.items())
            },
            "appliedEvents": self.applied_events,
        }

    def snapshot(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_snapshot(cls, data: bytes) -> ControllerState:
        state = cls()
        if not data:
            return state
        obj = json.loads(data.decode("utf-8"))
        for name, raw in obj.get("replicaInfoTable", {}).items():
            state.replica_info_table[name] = BrokerReplicaInfo(
                raw["clusterName"],
                raw["brokerName"],
                int(raw["nextAssignBrokerId"]),
                {
                    int(bid): BrokerIdentity(b["address"], b["registerCheckCode"])
                    for bid, b in raw["brokers"].items()
                },
            )
        for name, raw in obj.get("syncStateSetInfoTable", {}).items():
            mid = raw["masterBrokerId"]
            state.sync_state_set_info_table[name] = SyncStateInfo(
                raw["clusterName"],
                raw["brokerName"],
                None if mid is None else int(mid),
                int(raw["masterEpoch"]),
                {int(i) for i in raw["syncStateSet"]},
                int(raw["syncStateSetEpoch"]),
            )
        state.applied_events = int(obj.get("appliedEvents", 0))
        return state

    def restore(self, data: bytes) -> None:
        other = ControllerState.from_snapshot(data)
        self.replica_info_table = other.replica_info_table
        self.sync_state_set_info_table = other.sync_state_set_info_table
        self.applied_events = other.applied_events

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ControllerState) and self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]
