"""Property-based fuzzing of the controller protocol: headers, bodies and the service.

Whatever a request carries, a decoder answers its own error (HeaderError for headers,
ProtocolError for bodies) or values within the protocol's limits; the service answers
CONTROLLER_INVALID_REQUEST (never a system error), and nothing out of range reaches
the replicated state.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqcluster.common.javaints import INT32_MAX, INT64_MAX
from mqcluster.controller.config import ControllerConfig
from mqcluster.controller.consensus import LocalConsensus
from mqcluster.controller.service import ControllerService
from mqcluster.protocol import controller as protocol
from mqcluster.protocol.controller import (
    BrokerHeartbeatRequestHeader,
    BrokerReplicasInfo,
    ControllerResponseCode,
    ElectMasterResponseBody,
    EpochEntryCache,
    ProtocolError,
    RequestCode,
    SyncStateSetBody,
    decode_broker_names,
    parse_id_list,
)
from mqcluster.protocol.controller_fields import NAME_MAX, ControllerHeader
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.header import HeaderError
from mqcluster_testing.procs import free_addr

FUZZ = settings(max_examples=300, deadline=None, derandomize=True)

HEADERS: list[type[ControllerHeader]] = sorted(
    (obj for obj in vars(protocol).values()
     if isinstance(obj, type) and issubclass(obj, ControllerHeader)
     and obj is not ControllerHeader),
    key=lambda c: c.__name__,
)

NASTY = st.one_of(
    st.sampled_from([
        str(2**64), str(2**63), str(2**63 - 1), str(2**31), str(2**31 - 1), "-1", "+1", " 1",
        "1.0", "1e3", "01", "٣", "0x10", "nan", "true", "True", "1", "yes", "", "a b",
        "a\nb", "\x00", "x" * (NAME_MAX + 1), "9" * 5000, "127.0.0.1:10911", "a;b",
    ]),
    st.integers(-(2**70), 2**70).map(str),
    st.text(max_size=20),
)


def wire_names(cls: type[ControllerHeader]) -> list[str]:
    return [f.encode_name for f in msgspec.structs.fields(cls)]


def check_header(h: ControllerHeader) -> None:
    """Every field of a decoded header keeps to its declared limits."""
    for f in msgspec.structs.fields(type(h)):
        value = getattr(h, f.name)
        if value is None:
            continue
        tp = f.type
        args = typing.get_args(tp)
        if typing.get_origin(tp) in (typing.Union, __import__("types").UnionType):
            tp = next(a for a in args if a is not type(None))
        meta = [m for m in typing.get_args(tp)[1:] if isinstance(m, msgspec.Meta)]
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            assert 0 <= value <= INT64_MAX, (f.name, value)
            for m in meta:
                assert m.ge is None or value >= m.ge
                assert m.le is None or value <= m.le
        if isinstance(value, str):
            assert "\x00" not in value or not meta
            for m in meta:
                assert m.max_length is None or len(value) <= m.max_length


@FUZZ
@given(cls=st.sampled_from(HEADERS), data=st.data())
def test_headers_decode_within_limits_or_raise_header_error(
    cls: type[ControllerHeader], data: Any
) -> None:
    names = wire_names(cls)
    keys = st.sampled_from(names) if names else st.text(max_size=5)
    ext = data.draw(st.dictionaries(st.one_of(keys, st.text(max_size=5)), NASTY, max_size=8))
    try:
        h = cls.from_ext(ext)
    except HeaderError:
        return
    check_header(h)


@pytest.mark.parametrize("raw", ["1.0", "1e3", "+1", " 1", "01", "٣", str(2**63), "-1"])
def test_integers_are_decimal_digits_only(raw: str) -> None:
    with pytest.raises(HeaderError, match="brokerId"):
        BrokerHeartbeatRequestHeader.from_ext(
            {"clusterName": "c", "brokerAddr": "127.0.0.1:1", "brokerName": "b", "brokerId": raw})


@pytest.mark.parametrize(("field", "raw"), [
    ("epoch", str(2**31)), ("electionPriority", "-5"), ("maxOffset", str(2**63)),
    ("brokerName", "a b"), ("brokerName", "x" * 256), ("clusterName", "c\n"),
])
def test_header_fields_out_of_range_are_refused(field: str, raw: str) -> None:
    ext = {"clusterName": "c", "brokerAddr": "127.0.0.1:1", "brokerName": "b", field: raw}
    with pytest.raises(HeaderError, match=field):
        BrokerHeartbeatRequestHeader.from_ext(ext)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats()
    | st.text(max_size=8) | st.sampled_from(["1", "x" * 300]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["syncStateSet", "syncStateSetEpoch", "brokerMemberGroup",
                         "brokerAddrs", "replicasInfoTable", "masterBrokerId", "masterEpoch",
                         "inSyncReplicas", "brokerId", "alive", "epochList", "epoch",
                         "startOffset", "endOffset", "maxOffset", "1", "b"]) | st.text(max_size=4),
        inner, max_size=4),
    max_leaves=12,
)

BODY_DECODERS: list[Callable[[bytes], Any]] = [
    SyncStateSetBody.decode, ElectMasterResponseBody.decode, BrokerReplicasInfo.decode,
    EpochEntryCache.decode, decode_broker_names,
]


def _ints(value: Any) -> list[int]:
    """Every int in a decoded body (dataclasses, sets, lists, dicts)."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, dict):
        return [i for k, v in value.items() for i in _ints(k) + _ints(v)]
    if isinstance(value, list | set | tuple):
        return [i for v in value for i in _ints(v)]
    if hasattr(value, "__dataclass_fields__"):
        return [i for name in value.__dataclass_fields__ for i in _ints(getattr(value, name))]
    return []


@FUZZ
@given(body=st.one_of(st.binary(max_size=100), JSON_VALUES.map(lambda v: json.dumps(v).encode())),
       decode=st.sampled_from(BODY_DECODERS))
def test_bodies_decode_within_limits_or_raise_protocol_error(
    body: bytes, decode: Callable[[bytes], Any]
) -> None:
    try:
        value = decode(body)
    except ProtocolError:
        return
    assert all(-1 <= i <= INT64_MAX for i in _ints(value)), value


@FUZZ
@given(raw=st.one_of(NASTY, st.lists(NASTY, max_size=4).map(";".join)))
def test_id_lists_hold_broker_ids_or_raise_protocol_error(raw: str) -> None:
    try:
        ids = parse_id_list(raw)
    except ProtocolError:
        return
    assert all(type(i) is int and 0 <= i <= INT64_MAX for i in ids)


def test_epochs_past_a_java_int_are_refused() -> None:
    with pytest.raises(ProtocolError, match="syncStateSetEpoch"):
        SyncStateSetBody.decode(json.dumps({"syncStateSet": [1],
                                            "syncStateSetEpoch": INT32_MAX + 1}).encode())
    for member in (True, 1.0, "1", -1, 2**63):
        with pytest.raises(ProtocolError, match="SyncStateSet member"):
            SyncStateSetBody.decode(json.dumps({"syncStateSet": [member]}).encode())


# --- the service ----------------------------------------------------------------------

CODES = [c for c in RequestCode]
REQUEST_HEADERS = {
    RequestCode.BROKER_HEARTBEAT: protocol.BrokerHeartbeatRequestHeader,
    RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: protocol.GetNextBrokerIdRequestHeader,
    RequestCode.CONTROLLER_APPLY_BROKER_ID: protocol.ApplyBrokerIdRequestHeader,
    RequestCode.CONTROLLER_REGISTER_BROKER: protocol.RegisterBrokerToControllerRequestHeader,
    RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: protocol.AlterSyncStateSetRequestHeader,
    RequestCode.CONTROLLER_ELECT_MASTER: protocol.ElectMasterRequestHeader,
    RequestCode.CONTROLLER_GET_REPLICA_INFO: protocol.GetReplicaInfoRequestHeader,
    RequestCode.CLEAN_BROKER_DATA: protocol.CleanControllerBrokerDataRequestHeader,
}
VALID = {  # a plausible value per wire name, mutated by the strategy below
    "clusterName": "c1", "brokerName": "g", "brokerAddr": "127.0.0.1:10911",
    "brokerAddress": "127.0.0.1:10911", "brokerId": "1", "appliedBrokerId": "1",
    "registerCheckCode": "127.0.0.1:10911;1", "masterBrokerId": "1", "masterEpoch": "1",
    "epoch": "1", "maxOffset": "0", "confirmOffset": "0", "invokeTime": "1",
    "heartbeatTimeoutMills": "1000", "electionPriority": "1", "designateElect": "false",
    "brokerControllerIdsToClean": "1", "isCleanLivingBroker": "false",
}


@st.composite
def requests(draw: Any) -> RemotingCommand:
    code = draw(st.sampled_from(CODES))
    cls = REQUEST_HEADERS.get(code)
    ext = {n: VALID.get(n, "x") for n in wire_names(cls)} if cls else {}
    for name in draw(st.lists(st.sampled_from(sorted(ext) or ["x"]), max_size=3)):
        ext[name] = draw(NASTY)
    body = draw(st.one_of(st.just(b""), st.binary(max_size=40),
                          JSON_VALUES.map(lambda v: json.dumps(v).encode())))
    return RemotingCommand(code=int(code), ext_fields=ext, body=body)


async def _serve(cmds: list[RemotingCommand], store: Path) -> ControllerService:
    addr = free_addr()
    config = ControllerConfig.model_validate({
        "controllerDLegerPeers": f"n0-{addr}", "controllerDLegerSelfId": "n0",
        "controllerStorePath": str(store),
    })
    svc = ControllerService(config, consensus_factory=lambda sm, _r: LocalConsensus("n0", sm),
                            run_scanner=False)
    await svc.start()
    try:
        for cmd in cmds:
            resp = await svc.registry.dispatch(cmd, None)  # type: ignore[arg-type]
            assert resp is not None
            assert resp.code not in (ControllerResponseCode.SYSTEM_ERROR,), (cmd, resp.remark)
    finally:
        await svc.stop()
    return svc


@settings(FUZZ, max_examples=60)
@given(cmds=st.lists(requests(), min_size=1, max_size=12))
def test_the_service_answers_every_request_and_keeps_its_state_in_range(
    cmds: list[RemotingCommand],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        svc = asyncio.run(_serve(cmds, Path(tmp)))
    state = svc.state.to_json()
    assert all(-1 <= i <= INT64_MAX for i in _ints(state)), state
    for group in state.get("syncStateSetInfoTable", {}).values():
        assert 0 <= group.get("masterEpoch", 0) <= INT32_MAX
    text = json.dumps(state)
    assert "\\u0000" not in text and "\\n" not in text
