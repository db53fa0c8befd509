from __future__ import annotations

import pytest

from mqcluster.protocol.namesrv import (
    BrokerData,
    BrokerRegistration,
    ClusterInfo,
    RegisterBrokerRequestHeader,
    RequestCode,
    TopicConfig,
    TopicRouteData,
    decode_register_broker,
    encode_register_broker,
)
from mqcluster.wire.frame import FrameDecoder, FrameError, RemotingCommand, encode_frame


def roundtrip(cmd: RemotingCommand) -> RemotingCommand:
    (out,) = FrameDecoder().feed(encode_frame(cmd))
    return out


def test_register_broker_roundtrip_over_frames() -> None:
    reg = BrokerRegistration(
        clusterName="DefaultCluster",
        brokerName="broker-a",
        brokerAddr="127.0.0.2:10911",
        brokerId=1,
        haServerAddr="127.0.0.2:10912",
        proxyAddr="127.0.0.2:8081",
        heartbeatTimeoutMillis=10_000,
        enableActingMaster=True,
        topicConfigTable={"T": TopicConfig(readQueueNums=2, writeQueueNums=3, order=True)},
    )
    cmd = roundtrip(encode_register_broker(reg))
    assert cmd.code == int(RequestCode.REGISTER_BROKER) == 103
    assert cmd.ext_fields["enableActingMaster"] == "true"
    assert cmd.ext_fields["brokerId"] == "1"
    back = decode_register_broker(cmd)
    assert back.topicConfigTable["T"].topicName == "T"
    assert back.model_copy(update={"topicConfigTable": reg.topicConfigTable}) == reg


def test_header_missing_field_names_it() -> None:
    with pytest.raises(FrameError, match="brokerAddr"):
        RegisterBrokerRequestHeader.from_ext(
            {"brokerName": "a", "clusterName": "c", "brokerId": "0"})
    with pytest.raises(FrameError, match="brokerId"):
        RegisterBrokerRequestHeader.from_ext(
            {"brokerName": "a", "clusterName": "c", "brokerAddr": "x:1", "brokerId": "zero"})


def test_route_and_cluster_json_use_rocketmq_names() -> None:
    data = BrokerData(cluster="c", brokerName="b", brokerAddrs={0: "m:1", 1: "s:1"})
    route = TopicRouteData(brokerDatas=[data])
    raw = route.model_dump_json()
    assert '"brokerAddrs":{"0":"m:1","1":"s:1"}' in raw
    assert TopicRouteData.model_validate_json(raw) == route
    info = ClusterInfo(brokerAddrTable={"b": data}, clusterAddrTable={"c": ["b"]})
    assert info.master_addrs("c") == ["m:1"]
    assert info.master_addrs("nope") == []
