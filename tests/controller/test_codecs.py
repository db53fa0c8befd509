"""Protocol headers and bodies, event encoding, config keys, the broker identity file."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqcluster.broker.broker_identity import (
    BrokerIdentityRecord,
    IdentityError,
    read_identity,
    write_identity,
)
from mqcluster.common.config import ConfigError
from mqcluster.controller.config import ControllerConfig, load_controller_config, parse_peers
from mqcluster.controller.events import (
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    CleanBrokerDataEvent,
    ElectMasterEvent,
    Event,
    EventDecodeError,
    UpdateBrokerAddressEvent,
    decode_events,
    encode_events,
)
from mqcluster.controller.replicated import ControllerStateMachine
from mqcluster.protocol.controller import (
    BrokerHeartbeatRequestHeader,
    BrokerMemberGroup,
    BrokerReplicasInfo,
    ElectMasterRequestHeader,
    ElectMasterResponseBody,
    GetMetaDataResponseHeader,
    ProtocolError,
    ReplicaIdentity,
    ReplicasInfo,
    RequestCode,
    SyncStateSetBody,
    active_from_remark,
    not_leader_remark,
    parse_id_list,
)
from mqcluster.protocol.controller import ControllerResponseCode as Code
from mqcluster.wire.header import HeaderError


def test_codes_match_rocketmq() -> None:
    assert [int(c) for c in list(RequestCode)[1:9]] == list(range(1001, 1009))
    assert int(RequestCode.BROKER_HEARTBEAT) == 904
    assert int(RequestCode.CLEAN_BROKER_DATA) == 1011
    assert int(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID) == 1012
    assert int(RequestCode.CONTROLLER_APPLY_BROKER_ID) == 1013
    assert int(Code.CONTROLLER_NOT_LEADER) == 2007
    assert int(Code.CONTROLLER_MASTER_STILL_EXIST) == 2011
    assert int(Code.CONTROLLER_BROKER_ID_INVALID) == 2014


def test_header_round_trip_uses_rocketmq_field_names() -> None:
    h = ElectMasterRequestHeader(
        cluster_name="c", broker_name="b", broker_id=3, designate_elect=True, invoke_time=99)
    ext = h.to_ext()
    assert ext == {
        "clusterName": "c", "brokerName": "b", "brokerId": "3", "designateElect": "true",
        "invokeTime": "99",
    }
    assert ElectMasterRequestHeader.from_ext(ext) == h
    hb = BrokerHeartbeatRequestHeader(
        cluster_name="c", broker_addr="1.2.3.4:5", broker_name="b", broker_id=2, epoch=7,
        max_offset=2**45, confirm_offset=None, heartbeat_timeout_mills=1000, election_priority=1)
    assert hb.to_ext()["heartbeatTimeoutMills"] == "1000"
    assert BrokerHeartbeatRequestHeader.from_ext(hb.to_ext()) == hb
    meta = GetMetaDataResponseHeader(
        group="g", controller_leader_id=None, controller_leader_address=None, is_leader=False,
        peers="n0-a:1")
    assert GetMetaDataResponseHeader.from_ext(meta.to_ext()) == meta


def test_header_errors_name_the_field() -> None:
    with pytest.raises(HeaderError, match="brokerName"):
        ElectMasterRequestHeader.from_ext({"clusterName": "c"})
    with pytest.raises(HeaderError, match="brokerId"):
        ElectMasterRequestHeader.from_ext({"clusterName": "c", "brokerName": "b", "brokerId": "x"})
    with pytest.raises(HeaderError, match="designateElect"):
        ElectMasterRequestHeader.from_ext(
            {"clusterName": "c", "brokerName": "b", "designateElect": "maybe"}
        )


def test_bodies_round_trip() -> None:
    ssb = SyncStateSetBody({3, 1}, 4)
    assert SyncStateSetBody.decode(ssb.encode()) == ssb
    assert b'"syncStateSet":[1,3]' in ssb.encode()
    body = ElectMasterResponseBody(BrokerMemberGroup("c", "b", {1: "a:1", 2: "a:2"}), {2})
    assert ElectMasterResponseBody.decode(body.encode()) == body
    info = BrokerReplicasInfo(
        {"b": ReplicasInfo(1, "a:1", 2, 3, [ReplicaIdentity("b", 1, "a:1", True)], [])}
    )
    assert BrokerReplicasInfo.decode(info.encode()) == info
    for bad in (b"", b"[", b"[1]", b'{"syncStateSet": [true]}'):
        with pytest.raises(ProtocolError):
            SyncStateSetBody.decode(bad)


def test_remarks_and_id_lists() -> None:
    remark = not_leader_remark("127.0.0.5:9877")
    assert remark == "not active, active controller is 127.0.0.5:9877"
    assert active_from_remark(remark) == "127.0.0.5:9877"
    assert active_from_remark(not_leader_remark(None)) is None
    assert parse_id_list("1; 2;;3") == [1, 2, 3]
    with pytest.raises(ProtocolError):
        parse_id_list("1;x")


def test_events_round_trip_and_bad_entries() -> None:
    events: list[Event] = [
        ApplyBrokerIdEvent("c", "b", "a:1", 1, "a:1;code"),
        UpdateBrokerAddressEvent("c", "b", "a:2", 1),
        ElectMasterEvent("b", 1),
        ElectMasterEvent("b", None),
        AlterSyncStateSetEvent("b", frozenset({1, 2})),
        CleanBrokerDataEvent("b", frozenset({2})),
        CleanBrokerDataEvent("b", None),
    ]
    assert decode_events(encode_events(events)) == events
    for bad in (b"nope", b"{}", b'[{"type": "Bogus"}]', b'[{"type": "ElectMaster"}]'):
        with pytest.raises(EventDecodeError):
            decode_events(bad)
    sm = ControllerStateMachine()
    assert sm.apply(b"garbage") == 0  # skipped, never raises: the log always replays
    assert sm.apply(encode_events(events[:3])) == 3
    sync = sm.state.sync_state("b")
    assert sync is not None and sync.master_broker_id == 1


def test_config_keys_and_errors(tmp_path: Path) -> None:
    conf = tmp_path / "controller.conf"
    conf.write_text(
        "controllerDLegerGroup = group1\n"
        "controllerDLegerPeers = n0-127.0.0.1:9877;n1-127.0.0.1:9878;n2-127.0.0.1:9879\n"
        "controllerDLegerSelfId = n1\n"
        "controllerStorePath = /tmp/x\n"
        "enableElectUncleanMaster = true\n"
        "notifyBrokerRoleChanged = false\n"
    )
    cfg = load_controller_config(conf)
    assert cfg.self_addr == "127.0.0.1:9878"
    assert cfg.enableElectUncleanMaster is True and cfg.notifyBrokerRoleChanged is False
    assert cfg.listenPort == 9878 and cfg.controllerType == "DLedger"
    assert ControllerConfig().peers == {"n0": "127.0.0.1:9878"}
    with pytest.raises(ConfigError, match="scanNotActiveBrokerInterval"):
        load_controller_config(None, {"scanNotActiveBrokerInterval": "soon"})
    with pytest.raises(ConfigError, match="controllerDLegerSelfId"):
        load_controller_config(
            None, {"controllerDLegerPeers": "n0-a:1", "controllerDLegerSelfId": "n9"}
        )
    with pytest.raises(ConfigError, match="controllerDLegerPeers"):
        load_controller_config(None, {"controllerDLegerPeers": "n0:a:1"})
    with pytest.raises(ConfigError, match="controllerType"):
        load_controller_config(None, {"controllerType": "Raft"})
    assert parse_peers("n0-h:1;n1-h:2") == {"n0": "h:1", "n1": "h:2"}


def test_identity_file_round_trip_and_validation(tmp_path: Path) -> None:
    path = tmp_path / "store" / "brokerIdentity"
    assert read_identity(path) is None
    rec = BrokerIdentityRecord("DefaultCluster", "broker-a", 3, "abc123")
    write_identity(path, rec)
    assert path.read_text() == "DefaultCluster#broker-a#3#abc123\n"
    assert read_identity(path) == rec
    assert rec.check_code("1.2.3.4:10911") == "1.2.3.4:10911;abc123"
    assert not list(path.parent.glob("*.tmp"))
    for bad in ("a#b#c", "a#b#x#c", "a#b#0#c", "a##1#c"):
        path.write_text(bad)
        with pytest.raises(IdentityError):
            read_identity(path)
    with pytest.raises(IdentityError):
        BrokerIdentityRecord("a#b", "x", 1, "c").encode()


def test_embedded_config_from_name_server_properties() -> None:
    props = {
        "listenPort": "9876",
        "enableControllerInNamesrv": "true",
        "controllerDLegerGroup": "group1",
        "controllerDLegerPeers": "n0-127.0.0.1:9877",
        "controllerDLegerSelfId": "n0",
        "rocketmqHome": "/opt/rocketmq",
    }
    cfg = ControllerConfig.from_properties(props)
    assert cfg.self_addr == "127.0.0.1:9877" and cfg.controllerDLegerGroup == "group1"
    with pytest.raises(ConfigError, match="enableElectUncleanMaster"):
        ControllerConfig.from_properties({"enableElectUncleanMaster": "perhaps"})


def test_cli_prints_config_and_names_bad_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mqcluster.controller.main import main

    conf = tmp_path / "c.conf"
    conf.write_text("controllerDLegerPeers = n0-127.0.0.1:9877\nnotifyBrokerRoleChanged=false\n")
    assert main(["-c", str(conf), "-p"]) == 0
    out = capsys.readouterr().out
    assert "notifyBrokerRoleChanged=False" in out and "listenPort=9878" in out
    assert main(["-c", str(conf), "-o", "brokerHeartbeatTimeoutMills=-5"]) == 1
    assert "brokerHeartbeatTimeoutMills" in capsys.readouterr().err


def test_example_configs_load() -> None:
    examples = Path(__file__).resolve().parents[2] / "examples"
    found = sorted(examples.glob("controller*.conf"))
    assert len(found) >= 3
    ids = set()
    for path in found:
        cfg = load_controller_config(path)
        ids.add((cfg.controllerDLegerPeers, cfg.controllerDLegerSelfId))
    assert len(ids) == len(found)
