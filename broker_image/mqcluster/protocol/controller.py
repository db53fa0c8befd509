"""Controller wire protocol (RIP-44, RocketMQ 5.1.1+): request and response codes,
typed request/response headers (``extFields``) and JSON bodies.

Headers use the one header codec (:mod:`mqcluster.wire.header`) with snake_case
attributes; on the wire each field is the camelCase name RocketMQ uses
(``master_broker_id`` <-> ``masterBrokerId``). A header with a missing required field
or a value of the wrong type raises HeaderError naming the field; a malformed body
raises ProtocolError (a ValueError).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from mqcluster.common.javaints import INT32_MAX, INT64_MAX
from mqcluster.common.show import show
from mqcluster.protocol.controller_fields import (
    MAX_MEMBERS,
    NAME_MAX,
    Address,
    BrokerId,
    CheckCode,
    ControllerHeader,
    Epoch,
    Millis,
    Name,
    Offset,
    Peers,
    Priority,
    Term,
    Text,
    check_decimal,
    check_name,
)
from mqcluster.protocol.controller_fields import (
    ProtocolError as ProtocolError,
)
from mqcluster.protocol.epochs import EpochEntry
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.header import CamelHeader


class RequestCode(IntEnum):
    BROKER_HEARTBEAT = 904
    CONTROLLER_ALTER_SYNC_STATE_SET = 1001
    CONTROLLER_ELECT_MASTER = 1002
    CONTROLLER_REGISTER_BROKER = 1003
    CONTROLLER_GET_REPLICA_INFO = 1004
    CONTROLLER_GET_METADATA_INFO = 1005
    CONTROLLER_GET_SYNC_STATE_DATA = 1006
    GET_BROKER_EPOCH_CACHE = 1007
    NOTIFY_BROKER_ROLE_CHANGED = 1008
    UPDATE_CONTROLLER_CONFIG = 1009
    GET_CONTROLLER_CONFIG = 1010
    CLEAN_BROKER_DATA = 1011
    CONTROLLER_GET_NEXT_BROKER_ID = 1012
    CONTROLLER_APPLY_BROKER_ID = 1013


class ControllerResponseCode(IntEnum):
    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    INVALID_REQUEST = 4
    CONTROLLER_FENCED_MASTER_EPOCH = 2000
    CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = 2001
    CONTROLLER_INVALID_MASTER = 2002
    CONTROLLER_INVALID_REPLICAS = 2003
    CONTROLLER_MASTER_NOT_AVAILABLE = 2004
    CONTROLLER_INVALID_REQUEST = 2005
    CONTROLLER_BROKER_NOT_ALIVE = 2006
    CONTROLLER_NOT_LEADER = 2007
    CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008
    CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 2009
    CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 2010
    CONTROLLER_MASTER_STILL_EXIST = 2011
    CONTROLLER_ELECT_MASTER_FAILED = 2012
    CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 2013
    CONTROLLER_BROKER_ID_INVALID = 2014
    CONTROLLER_JRAFT_INTERNAL_ERROR = 2015
    CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS = 2016


# RocketMQ's MixAll.MASTER_ID and MixAll.FIRST_BROKER_CONTROLLER_ID.
MASTER_ID = 0
FIRST_BROKER_CONTROLLER_ID = 1

WRITE_CODES: frozenset[int] = frozenset(
    {
        RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
        RequestCode.CONTROLLER_ELECT_MASTER,
        RequestCode.CONTROLLER_REGISTER_BROKER,
        RequestCode.CONTROLLER_APPLY_BROKER_ID,
        RequestCode.CLEAN_BROKER_DATA,
    }
)
"""Requests that change replicated state: only the active controller serves them."""

LEADER_ONLY_CODES: frozenset[int] = WRITE_CODES | {
    RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
    RequestCode.CONTROLLER_GET_REPLICA_INFO,
    RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
}
"""Served by the active controller only; others answer CONTROLLER_NOT_LEADER.

Every controller accepts BROKER_HEARTBEAT and answers CONTROLLER_GET_METADATA_INFO."""


def not_leader_remark(active_addr: str | None) -> str:
    return f"not active, active controller is {active_addr or 'unknown'}"


_ACTIVE_RE = re.compile(r"active controller is (\S+)")


def active_from_remark(remark: str | None) -> str | None:
    """The active controller address carried by a CONTROLLER_NOT_LEADER remark."""
    m = _ACTIVE_RE.search(remark or "")
    if m is None or m.group(1) == "unknown":
        return None
    return m.group(1)


# --------------------------------------------------------------------------- headers


class BrokerHeartbeatRequestHeader(ControllerHeader):
    cluster_name: Name
    broker_addr: Address
    broker_name: Name
    broker_id: BrokerId | None = None
    epoch: Epoch | None = None
    max_offset: Offset | None = None
    confirm_offset: Offset | None = None
    heartbeat_timeout_mills: Millis | None = None
    election_priority: Priority | None = None


class GetNextBrokerIdRequestHeader(ControllerHeader):
    cluster_name: Name
    broker_name: Name


class GetNextBrokerIdResponseHeader(ControllerHeader):
    cluster_name: Name
    broker_name: Name
    next_broker_id: BrokerId


class ApplyBrokerIdRequestHeader(ControllerHeader):
    cluster_name: Name
    broker_name: Name
    applied_broker_id: BrokerId
    register_check_code: CheckCode
    """``brokerAddress;code``: the address before ``;`` is recorded for the id."""


class ApplyBrokerIdResponseHeader(ControllerHeader):
    cluster_name: Name
    broker_name: Name


class RegisterBrokerToControllerRequestHeader(ControllerHeader):
    cluster_name: Name
    broker_name: Name
    broker_id: BrokerId
    broker_address: Address
    invoke_time: Millis | None = None


class RegisterBrokerToControllerResponseHeader(ControllerHeader):
    cluster_name: Name
    broker_name: Name
    master_broker_id: BrokerId | None = None
    master_address: Address | None = None
    master_epoch: Epoch | None = None
    sync_state_set_epoch: Epoch | None = None


class AlterSyncStateSetRequestHeader(ControllerHeader):
    broker_name: Name
    master_broker_id: BrokerId
    master_epoch: Epoch
    invoke_time: Millis | None = None


class AlterSyncStateSetResponseHeader(ControllerHeader):
    new_sync_state_set_epoch: Epoch


class ElectMasterRequestHeader(ControllerHeader):
    cluster_name: Name
    broker_name: Name
    broker_id: BrokerId | None = None
    """With ``designate_elect``: the broker the admin names; otherwise the requester."""
    designate_elect: bool = False
    invoke_time: Millis | None = None


class ElectMasterResponseHeader(ControllerHeader):
    master_broker_id: BrokerId | None = None
    master_address: Address | None = None
    master_epoch: Epoch | None = None
    sync_state_set_epoch: Epoch | None = None


class GetReplicaInfoRequestHeader(ControllerHeader):
    broker_name: Name


class GetReplicaInfoResponseHeader(ControllerHeader):
    master_broker_id: BrokerId | None = None
    master_address: Address | None = None
    master_epoch: Epoch | None = None


class GetMetaDataResponseHeader(ControllerHeader):
    group: Text
    controller_leader_id: Text | None = None
    controller_leader_address: Text | None = None
    is_leader: bool
    peers: Peers
    """``n0-host:port;n1-host:port``, as controllerDLegerPeers."""
    term: Term = 0
    self_id: Text = ""
    self_address: Text = ""


class CleanControllerBrokerDataRequestHeader(ControllerHeader):
    cluster_name: Name | None = None
    broker_name: Name
    broker_controller_ids_to_clean: Text | None = None
    """Ids joined by ``;``; empty or absent means every broker of the group."""
    is_clean_living_broker: bool = False
    invoke_time: Millis | None = None


class NotifyBrokerRoleChangedRequestHeader(ControllerHeader):
    master_address: Address | None = None
    master_epoch: Epoch
    sync_state_set_epoch: Epoch
    master_broker_id: BrokerId | None = None


class GetBrokerEpochCacheRequestHeader(ControllerHeader):
    """Sent to a broker (its listen address); no fields."""


def parse_id_list(raw: str | None) -> list[int]:
    """``"1;2;3"`` -> ``[1, 2, 3]``; raises ProtocolError on anything but broker ids."""
    out: list[int] = []
    for part in (raw or "").split(";"):
        part = part.strip()
        if not part:
            continue
        if not check_decimal(part):
            raise ProtocolError(f"broker id {show(part)} is not an integer")
        out.append(_as_id(int(part), "broker id"))
    return out


# --------------------------------------------------------------------------- bodies


def encode_json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode("utf-8")


def decode_json(body: bytes, what: str) -> Any:
    if not body:
        raise ProtocolError(f"{what}: body is required")
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # (JSONDecodeError too)
        raise ProtocolError(f"{what}: body is not valid JSON: {show(str(exc))}") from None


def _as_int(value: Any, what: str, lo: int = 0, hi: int = INT64_MAX) -> int:
    """A JSON integer (not a bool, a float or a string) in ``lo..hi``."""
    if type(value) is not int:
        raise ProtocolError(f"{what} must be an integer, got {show(value)}")
    if not lo <= value <= hi:
        raise ProtocolError(f"{what} {value} is out of range {lo}..{hi}")
    return value


def _as_id(value: Any, what: str = "broker id") -> int:
    return _as_int(value, what)


def _as_epoch(value: Any, what: str) -> int:
    return _as_int(value, what, 0, INT32_MAX)


def _key_id(key: str, what: str = "broker id") -> int:
    """A broker id that is a JSON object's key (a string of decimal digits)."""
    if not check_decimal(key):
        raise ProtocolError(f"{what} {show(key)} is not an integer")
    return _as_id(int(key), what)


def _as_str(value: Any, what: str, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if type(value) is not str or len(value) > 4 * NAME_MAX:
        raise ProtocolError(f"{what} must be a string of at most {4 * NAME_MAX} "
                            f"characters, got {show(value)}")
    return value


def _as_bool(value: Any, what: str) -> bool:
    if type(value) is not bool:
        raise ProtocolError(f"{what} must be true or false, got {show(value)}")
    return value


def _as_list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise ProtocolError(f"{what} must be a list, got {show(value)}")
    return value


def _as_obj(data: Any, what: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ProtocolError(f"{what} must be a JSON object")
    return data


@dataclass
class SyncStateSetBody:
    """``{"syncStateSet": [brokerId...], "syncStateSetEpoch": n}``."""

    sync_state_set: set[int]
    sync_state_set_epoch: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "syncStateSet": sorted(self.sync_state_set),
            "syncStateSetEpoch": self.sync_state_set_epoch,
        }

    def encode(self) -> bytes:
        return encode_json(self.to_json())

    @classmethod
    def from_json(cls, data: Any) -> SyncStateSetBody:
        obj = _as_obj(data, "SyncStateSet")
        members = obj.get("syncStateSet")
        if not isinstance(members, list) or len(members) > MAX_MEMBERS:
            raise ProtocolError(f"SyncStateSet.syncStateSet must be a list of at most "
                                f"{MAX_MEMBERS} broker ids")
        return cls(
            {_as_id(m, "SyncStateSet member") for m in members},
            _as_epoch(obj.get("syncStateSetEpoch", 0), "syncStateSetEpoch"),
        )

    @classmethod
    def decode(cls, body: bytes) -> SyncStateSetBody:
        return cls.from_json(decode_json(body, "SyncStateSet"))


@dataclass
class BrokerMemberGroup:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "brokerName": self.broker_name,
            "brokerAddrs": {str(k): v for k, v in sorted(self.broker_addrs.items())},
        }

    @classmethod
    def from_json(cls, data: Any) -> BrokerMemberGroup:
        obj = _as_obj(data, "BrokerMemberGroup")
        addrs = _as_obj(obj.get("brokerAddrs") or {}, "brokerAddrs")
        return cls(
            _as_str(obj.get("cluster", ""), "cluster"),
            _as_str(obj.get("brokerName", ""), "brokerName"),
            {_key_id(k): _as_str(v, "broker address") for k, v in addrs.items()},
        )


@dataclass
class ElectMasterResponseBody:
    broker_member_group: BrokerMemberGroup | None
    sync_state_set: set[int]

    def encode(self) -> bytes:
        return encode_json(
            {
                "brokerMemberGroup": (
                    self.broker_member_group.to_json() if self.broker_member_group else None
                ),
                "syncStateSet": sorted(self.sync_state_set),
            }
        )

    @classmethod
    def decode(cls, body: bytes) -> ElectMasterResponseBody:
        obj = _as_obj(decode_json(body, "ElectMasterResponseBody"), "ElectMasterResponseBody")
        group = obj.get("brokerMemberGroup")
        members = obj.get("syncStateSet") or []
        if not isinstance(members, list):
            raise ProtocolError("ElectMasterResponseBody.syncStateSet must be a list")
        return cls(
            BrokerMemberGroup.from_json(group) if group is not None else None,
            {_as_id(m, "SyncStateSet member") for m in members},
        )


@dataclass
class ReplicaIdentity:
    broker_name: str
    broker_id: int
    broker_address: str
    alive: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "brokerId": self.broker_id,
            "brokerAddress": self.broker_address,
            "alive": self.alive,
        }

    @classmethod
    def from_json(cls, data: Any) -> ReplicaIdentity:
        obj = _as_obj(data, "ReplicaIdentity")
        return cls(
            _as_str(obj.get("brokerName", ""), "brokerName"),
            _as_id(obj.get("brokerId"), "brokerId"),
            _as_str(obj.get("brokerAddress", ""), "brokerAddress"),
            _as_bool(obj.get("alive", False), "alive"),
        )


@dataclass
class ReplicasInfo:
    master_broker_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set_epoch: int
    in_sync_replicas: list[ReplicaIdentity] = field(default_factory=list)
    not_in_sync_replicas: list[ReplicaIdentity] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "masterBrokerId": self.master_broker_id,
            "masterAddress": self.master_address,
            "masterEpoch": self.master_epoch,
            "syncStateSetEpoch": self.sync_state_set_epoch,
            "inSyncReplicas": [r.to_json() for r in self.in_sync_replicas],
            "notInSyncReplicas": [r.to_json() for r in self.not_in_sync_replicas],
        }

    @classmethod
    def from_json(cls, data: Any) -> ReplicasInfo:
        obj = _as_obj(data, "ReplicasInfo")
        mid = obj.get("masterBrokerId")
        return cls(
            None if mid is None else _as_id(mid, "masterBrokerId"),
            _as_str(obj.get("masterAddress"), "masterAddress", optional=True),
            _as_epoch(obj.get("masterEpoch", 0), "masterEpoch"),
            _as_epoch(obj.get("syncStateSetEpoch", 0), "syncStateSetEpoch"),
            [ReplicaIdentity.from_json(r)
             for r in _as_list(obj.get("inSyncReplicas") or [], "inSyncReplicas")],
            [ReplicaIdentity.from_json(r)
             for r in _as_list(obj.get("notInSyncReplicas") or [], "notInSyncReplicas")],
        )


@dataclass
class BrokerReplicasInfo:
    """Response body of CONTROLLER_GET_SYNC_STATE_DATA: ``{"replicasInfoTable": {name: ...}}``."""

    replicas_info_table: dict[str, ReplicasInfo] = field(default_factory=dict)

    def encode(self) -> bytes:
        return encode_json(
            {
                "replicasInfoTable": {
                    name: info.to_json() for name, info in sorted(self.replicas_info_table.items())
                }
            }
        )

    @classmethod
    def decode(cls, body: bytes) -> BrokerReplicasInfo:
        obj = _as_obj(decode_json(body, "BrokerReplicasInfo"), "BrokerReplicasInfo")
        table = _as_obj(obj.get("replicasInfoTable") or {}, "replicasInfoTable")
        return cls({check_name(k, "broker name"): ReplicasInfo.from_json(v)
                    for k, v in table.items()})


def encode_broker_names(names: list[str]) -> bytes:
    """Request body of CONTROLLER_GET_SYNC_STATE_DATA: a JSON list of broker names."""
    return encode_json(list(names))


def decode_broker_names(body: bytes) -> list[str]:
    data = decode_json(body, "broker names")
    if not isinstance(data, list):
        raise ProtocolError("broker names must be a JSON list of strings")
    return [check_name(n, "broker name") for n in data]


def _epoch_entry(data: Any) -> EpochEntry:
    """One entry of ``epochList``; an absent ``endOffset`` is -1 (not known)."""
    obj = _as_obj(data, "EpochEntry")
    return EpochEntry(
        _as_epoch(obj.get("epoch"), "epoch"),
        _as_int(obj.get("startOffset"), "startOffset"),
        _as_int(obj.get("endOffset", -1), "endOffset", -1),
    )


@dataclass
class EpochEntryCache:
    """Response body of GET_BROKER_EPOCH_CACHE, answered by a broker."""

    cluster_name: str
    broker_name: str
    broker_id: int
    epoch_list: list[EpochEntry]
    max_offset: int

    def encode(self) -> bytes:
        return encode_json(
            {
                "clusterName": self.cluster_name,
                "brokerName": self.broker_name,
                "brokerId": self.broker_id,
                "epochList": [e.to_json() for e in self.epoch_list],
                "maxOffset": self.max_offset,
            }
        )

    @classmethod
    def decode(cls, body: bytes) -> EpochEntryCache:
        obj = _as_obj(decode_json(body, "EpochEntryCache"), "EpochEntryCache")
        return cls(
            _as_str(obj.get("clusterName", ""), "clusterName"),
            _as_str(obj.get("brokerName", ""), "brokerName"),
            _as_id(obj.get("brokerId", 0), "brokerId"),
            [_epoch_entry(e) for e in _as_list(obj.get("epochList") or [], "epochList")],
            _as_int(obj.get("maxOffset", 0), "maxOffset"),
        )


# --------------------------------------------------------------------------- helpers


def request(code: int, header: CamelHeader | None = None, body: bytes = b"") -> RemotingCommand:
    cmd = RemotingCommand(code=int(code), body=body)
    if header is not None:
        cmd.ext_fields = header.to_ext()
    return cmd


def response(
    req: RemotingCommand,
    code: int = ControllerResponseCode.SUCCESS,
    remark: str | None = None,
    header: CamelHeader | None = None,
    body: bytes = b"",
) -> RemotingCommand:
    resp = req.response(code, remark=remark, body=body)
    if header is not None:
        resp.ext_fields = header.to_ext()
    return resp


def code_name(code: int) -> str:
    try:
        return ControllerResponseCode(code).name
    except ValueError:
        return str(code)


def request_name(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return str(code)
