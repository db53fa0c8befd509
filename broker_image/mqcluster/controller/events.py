"""Controller events: the entries of the replicated log, and their byte encoding.

The manager validates a request against the state and emits events; the
events go through Raft and every controller applies them in log order.
One log entry carries a batch of events (a request may emit several).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ApplyBrokerIdEvent:
    cluster_name: str
    broker_name: str
    broker_address: str
    broker_id: int
    register_check_code: str


@dataclass(frozen=True)
class UpdateBrokerAddressEvent:
    cluster_name: str
    broker_name: str
    broker_address: str
    broker_id: int


@dataclass(frozen=True)
class ElectMasterEvent:
    broker_name: str
    new_master_broker_id: int | None
    """None: no replica could be elected; the master is cleared, the SyncStateSet kept."""


@dataclass(frozen=True)
class AlterSyncStateSetEvent:
    broker_name: str
    new_sync_state_set: frozenset[int]


@dataclass(frozen=True)
class CleanBrokerDataEvent:
    broker_name: str
    broker_ids_to_clean: frozenset[int] | None
    """None: the whole broker group."""


Event = (
    ApplyBrokerIdEvent
    | UpdateBrokerAddressEvent
    | ElectMasterEvent
    | AlterSyncStateSetEvent
    | CleanBrokerDataEvent
)


class EventDecodeError(ValueError):
    """A log entry is not a valid event batch."""


def event_to_json(ev: Event) -> dict[str, Any]:
    if isinstance(ev, ApplyBrokerIdEvent):
        return {
            "type": "ApplyBrokerId",
            "clusterName": ev.cluster_name,
            "brokerName": ev.broker_name,
            "brokerAddress": ev.broker_address,
            "brokerId": ev.broker_id,
            "registerCheckCode": ev.register_check_code,
        }
    if isinstance(ev, UpdateBrokerAddressEvent):
        return {
            "type": "UpdateBrokerAddress",
            "clusterName": ev.cluster_name,
            "brokerName": ev.broker_name,
            "brokerAddress": ev.broker_address,
            "brokerId": ev.broker_id,
        }
    if isinstance(ev, ElectMasterEvent):
        return {
            "type": "ElectMaster",
            "brokerName": ev.broker_name,
            "newMasterBrokerId": ev.new_master_broker_id,
        }
    if isinstance(ev, AlterSyncStateSetEvent):
        return {
            "type": "AlterSyncStateSet",
            "brokerName": ev.broker_name,
            "newSyncStateSet": sorted(ev.new_sync_state_set),
        }
    return {
        "type": "CleanBrokerData",
        "brokerName": ev.broker_name,
        "brokerIdsToClean": (
            None if ev.broker_ids_to_clean is None else sorted(ev.broker_ids_to_clean)
        ),
    }


def event_from_json(obj: Any) -> Event:
    if not isinstance(obj, dict):
        raise EventDecodeError("event must be a JSON object")
    kind = obj.get("type")
    try:
        if kind == "ApplyBrokerId":
            return ApplyBrokerIdEvent(
                str(obj["clusterName"]),
                str(obj["brokerName"]),
                str(obj["brokerAddress"]),
                int(obj["brokerId"]),
                str(obj["registerCheckCode"]),
            )
        if kind == "UpdateBrokerAddress":
            return UpdateBrokerAddressEvent(
                str(obj["clusterName"]),
                str(obj["brokerName"]),
                str(obj["brokerAddress"]),
                int(obj["brokerId"]),
            )
        if kind == "ElectMaster":
            mid = obj["newMasterBrokerId"]
            return ElectMasterEvent(str(obj["brokerName"]), None if mid is None else int(mid))
        if kind == "AlterSyncStateSet":
            return AlterSyncStateSetEvent(
                str(obj["brokerName"]), frozenset(int(i) for i in obj["newSyncStateSet"])
            )
        if kind == "CleanBrokerData":
            ids = obj["brokerIdsToClean"]
            return CleanBrokerDataEvent(
                str(obj["brokerName"]), None if ids is None else frozenset(int(i) for i in ids)
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise EventDecodeError(f"bad {kind} event: {exc!r}") from None
    raise EventDecodeError(f"unknown event type {kind!r}")


def encode_events(events: list[Event]) -> bytes:
    return json.dumps([event_to_json(e) for e in events], separators=(",", ":")).encode()


def decode_events(data: bytes) -> list[Event]:
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EventDecodeError(f"entry is not JSON: {exc}") from None
    if not isinstance(raw, list):
        raise EventDecodeError("entry must be a JSON list of events")
    return [event_from_json(e) for e in raw]
