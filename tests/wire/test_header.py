"""The one header codec: RocketMQ's extFields as typed models."""

from __future__ import annotations

import typing
from typing import Annotated

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqcluster.protocol import broker, controller, namesrv
from mqcluster.wire.frame import FrameError, RemotingCommand
from mqcluster.wire.header import CamelHeader, Header, HeaderError


class QueueHeader(Header):
    topic: str
    queueId: int
    commitOffset: int | None = None
    unitMode: bool = False


class SnakeHeader(CamelHeader):
    broker_name: str
    master_epoch: int
    is_leader: bool = False
    note: str | None = None


def test_fields_travel_as_rocketmq_strings() -> None:
    h = QueueHeader(topic="T", queueId=3, unitMode=True)
    assert h.to_ext() == {"topic": "T", "queueId": "3", "unitMode": "true"}
    assert QueueHeader.from_ext(h.to_ext()) == h


def test_snake_case_attributes_are_camel_case_on_the_wire() -> None:
    h = SnakeHeader(broker_name="b", master_epoch=7)
    assert h.to_ext() == {"brokerName": "b", "masterEpoch": "7", "isLeader": "false"}
    cmd = RemotingCommand(code=1, ext_fields=h.to_ext())
    assert SnakeHeader.from_command(cmd) == h


@given(st.text(max_size=20), st.integers(-(2**63), 2**63 - 1),
       st.one_of(st.none(), st.integers(0, 2**62)), st.booleans())
def test_round_trip(topic: str, queue: int, offset: int | None, unit: bool) -> None:
    h = QueueHeader(topic=topic, queueId=queue, commitOffset=offset, unitMode=unit)
    assert QueueHeader.from_ext(h.to_ext()) == h


def test_a_missing_field_is_named() -> None:
    with pytest.raises(HeaderError, match="queueId"):
        QueueHeader.from_ext({"topic": "T"})
    with pytest.raises(HeaderError, match="masterEpoch"):
        SnakeHeader.from_ext({"brokerName": "b"})


def test_a_malformed_value_is_named_and_is_a_frame_error() -> None:
    with pytest.raises(HeaderError, match="queueId") as err:
        QueueHeader.from_ext({"topic": "T", "queueId": "three"})
    assert isinstance(err.value, FrameError)  # the RPC layer answers INVALID_REQUEST
    with pytest.raises(HeaderError, match="unitMode"):
        QueueHeader.from_ext({"topic": "T", "queueId": "1", "unitMode": "maybe"})


def test_an_error_quotes_a_long_value_cut_short() -> None:
    """A megabyte value is not sent back whole in the error (nor written to the log)."""
    with pytest.raises(HeaderError) as err:
        QueueHeader.from_ext({"topic": "T", "queueId": "7" * 1_000_000})
    message = str(err.value)
    assert "queueId" in message and "(1000000 characters)" in message
    assert len(message) < 300


def test_unknown_fields_are_ignored_and_empty_values_are_absent() -> None:
    h = QueueHeader.from_ext({"topic": "T", "queueId": "1", "commitOffset": "",
                              "bname": "from a newer client"})
    assert h.commitOffset is None
    assert QueueHeader.from_ext({"topic": "", "queueId": "1"}).topic == ""


class Bounded(Header):
    name: Annotated[str, msgspec.Meta(min_length=1)]
    count: Annotated[int, msgspec.Meta(ge=1)] = 32


def test_every_missing_and_malformed_field_is_named_in_one_error() -> None:
    with pytest.raises(HeaderError) as err:
        QueueHeader.from_ext({"queueId": "three", "commitOffset": "x", "unitMode": "maybe"})
    assert str(err.value) == (
        "bad QueueHeader: topic: missing; queueId: expected int, got 'three'; "
        "commitOffset: expected int, got 'x'; unitMode: expected bool, got 'maybe'"
    )
    with pytest.raises(HeaderError) as err:
        SnakeHeader.from_ext({"masterEpoch": "", "isLeader": "2"})
    assert str(err.value) == (
        "bad SnakeHeader: brokerName: missing; masterEpoch: missing; "
        "isLeader: expected bool, got '2'"
    )


def test_constraints_are_checked_and_named() -> None:
    with pytest.raises(HeaderError) as err:
        Bounded.from_ext({"name": "", "count": "0"})
    assert str(err.value) == (
        "bad Bounded: name: expected str of length >= 1, got ''; count: expected int >= 1, got '0'"
    )
    assert Bounded.from_ext({"name": "n"}) == Bounded(name="n", count=32)
    with pytest.raises(HeaderError, match="queueId: expected int >= 0, got '-1'"):
        broker.PullMessageRequestHeader.from_ext(
            {"consumerGroup": "g", "topic": "T", "queueId": "-1", "queueOffset": "0"})


def test_fields_are_keyword_only_and_compare_by_value() -> None:
    with pytest.raises(TypeError):
        QueueHeader("T", 1)  # type: ignore[call-arg]
    assert QueueHeader(topic="T", queueId=1) == QueueHeader(topic="T", queueId=1)
    assert QueueHeader(topic="T", queueId=1) != QueueHeader(topic="T", queueId=2)
    assert repr(SnakeHeader(broker_name="b", master_epoch=1)) == (
        "SnakeHeader(broker_name='b', master_epoch=1, is_leader=False, note=None)")


class Child(QueueHeader):
    extra: int | None = None


class Custom(QueueHeader):
    def to_ext(self) -> dict[str, str]:
        return {"custom": self.topic}


class CustomChild(Custom):
    more: int = 0


def test_a_subclass_writes_its_inherited_fields_and_keeps_a_hand_written_to_ext() -> None:
    assert Child(topic="T", queueId=1, extra=5).to_ext() == {
        "topic": "T", "queueId": "1", "unitMode": "false", "extra": "5"}
    assert CustomChild(topic="T", queueId=1).to_ext() == {"custom": "T"}


def _headers() -> list[type[Header]]:
    modules = (broker, controller, namesrv)
    return [
        obj for module in modules for obj in vars(module).values()
        if isinstance(obj, type) and issubclass(obj, Header) and obj.__module__ == module.__name__
    ]


def test_every_header_round_trips_and_leaves_out_none() -> None:
    samples: dict[object, object] = {str: "s", int: 7, bool: True}
    for cls in _headers():
        fields = msgspec.structs.fields(cls)
        values = {}
        for f in fields:
            base = f.type
            while typing.get_args(base):  # Annotated[int, ...] | None -> int
                base = typing.get_args(base)[0]
            values[f.name] = samples[base]
        h = cls(**values)
        assert cls.from_ext(h.to_ext()) == h, cls
        # None is left out, whatever the field
        h = cls(**{f.name: values[f.name] if f.required else None for f in fields})
        assert set(h.to_ext()) == {f.encode_name for f in fields if f.required}, cls


# RocketMQ's Java field names of the camelCase headers, attribute by attribute.
CAMEL_WIRE_NAMES = {
    "AlterSyncStateSetRequestHeader": {
        "broker_name": "brokerName",
        "invoke_time": "invokeTime",
        "master_broker_id": "masterBrokerId",
        "master_epoch": "masterEpoch",
    },
    "AlterSyncStateSetResponseHeader": {"new_sync_state_set_epoch": "newSyncStateSetEpoch"},
    "ApplyBrokerIdRequestHeader": {
        "applied_broker_id": "appliedBrokerId",
        "broker_name": "brokerName",
        "cluster_name": "clusterName",
        "register_check_code": "registerCheckCode",
    },
    "ApplyBrokerIdResponseHeader": {"broker_name": "brokerName", "cluster_name": "clusterName"},
    "BrokerHeartbeatRequestHeader": {
        "broker_addr": "brokerAddr",
        "broker_id": "brokerId",
        "broker_name": "brokerName",
        "cluster_name": "clusterName",
        "confirm_offset": "confirmOffset",
        "election_priority": "electionPriority",
        "epoch": "epoch",
        "heartbeat_timeout_mills": "heartbeatTimeoutMills",
        "max_offset": "maxOffset",
    },
    "CleanControllerBrokerDataRequestHeader": {
        "broker_controller_ids_to_clean": "brokerControllerIdsToClean",
        "broker_name": "brokerName",
        "cluster_name": "clusterName",
        "invoke_time": "invokeTime",
        "is_clean_living_broker": "isCleanLivingBroker",
    },
    "ElectMasterRequestHeader": {
        "broker_id": "brokerId",
        "broker_name": "brokerName",
        "cluster_name": "clusterName",
        "designate_elect": "designateElect",
        "invoke_time": "invokeTime",
    },
    "ElectMasterResponseHeader": {
        "master_address": "masterAddress",
        "master_broker_id": "masterBrokerId",
        "master_epoch": "masterEpoch",
        "sync_state_set_epoch": "syncStateSetEpoch",
    },
    "GetBrokerEpochCacheRequestHeader": {},
    "GetMetaDataResponseHeader": {
        "controller_leader_address": "controllerLeaderAddress",
        "controller_leader_id": "controllerLeaderId",
        "group": "group",
        "is_leader": "isLeader",
        "peers": "peers",
        "self_address": "selfAddress",
        "self_id": "selfId",
        "term": "term",
    },
    "GetNextBrokerIdRequestHeader": {"broker_name": "brokerName", "cluster_name": "clusterName"},
    "GetNextBrokerIdResponseHeader": {
        "broker_name": "brokerName",
        "cluster_name": "clusterName",
        "next_broker_id": "nextBrokerId",
    },
    "GetReplicaInfoRequestHeader": {"broker_name": "brokerName"},
    "GetReplicaInfoResponseHeader": {
        "master_address": "masterAddress",
        "master_broker_id": "masterBrokerId",
        "master_epoch": "masterEpoch",
    },
    "NotifyBrokerRoleChangedRequestHeader": {
        "master_address": "masterAddress",
        "master_broker_id": "masterBrokerId",
        "master_epoch": "masterEpoch",
        "sync_state_set_epoch": "syncStateSetEpoch",
    },
    "RegisterBrokerToControllerRequestHeader": {
        "broker_address": "brokerAddress",
        "broker_id": "brokerId",
        "broker_name": "brokerName",
        "cluster_name": "clusterName",
        "invoke_time": "invokeTime",
    },
    "RegisterBrokerToControllerResponseHeader": {
        "broker_name": "brokerName",
        "cluster_name": "clusterName",
        "master_address": "masterAddress",
        "master_broker_id": "masterBrokerId",
        "master_epoch": "masterEpoch",
        "sync_state_set_epoch": "syncStateSetEpoch",
    },
}


def test_wire_names_of_the_camel_case_headers_are_rocketmqs() -> None:
    camel = {cls.__name__: cls for cls in _headers() if issubclass(cls, CamelHeader)}
    assert sorted(camel) == sorted(CAMEL_WIRE_NAMES)
    for name, wire in CAMEL_WIRE_NAMES.items():
        fields = msgspec.structs.fields(camel[name])
        assert {f.name: f.encode_name for f in fields} == wire, name


def test_plain_headers_use_their_attribute_names_on_the_wire() -> None:
    for cls in _headers():
        if not issubclass(cls, CamelHeader) and cls is not broker.SendMessageRequestHeaderV2:
            assert all(f.encode_name == f.name for f in msgspec.structs.fields(cls)), cls


V2_WIRE_NAMES = {
    "producerGroup": "a", "topic": "b", "defaultTopic": "c", "defaultTopicQueueNums": "d",
    "queueId": "e", "sysFlag": "f", "bornTimestamp": "g", "flag": "h", "properties": "i",
    "reconsumeTimes": "j", "unitMode": "k", "maxReconsumeTimes": "l", "batch": "m",
    "bname": "n",
}
"""RocketMQ's ``SendMessageRequestHeaderV2``."""


def test_a_renamed_header_decodes_its_own_wire_names_into_the_same_fields() -> None:
    v1, v2 = broker.SendMessageRequestHeader, broker.SendMessageRequestHeaderV2
    assert {f.name: f.encode_name for f in msgspec.structs.fields(v2)} == V2_WIRE_NAMES
    ext = {"producerGroup": "g", "topic": "T", "queueId": "3", "bornTimestamp": "17",
           "properties": "p", "batch": "true", "maxReconsumeTimes": "16"}
    header = v2.from_ext({V2_WIRE_NAMES[k]: v for k, v in ext.items()})
    assert isinstance(header, v1)
    assert msgspec.structs.asdict(header) == msgspec.structs.asdict(v1.from_ext(ext))
    assert header.to_ext() == {V2_WIRE_NAMES[k]: v for k, v in v1.from_ext(ext).to_ext().items()}
    with pytest.raises(HeaderError, match=r"b: missing; e: expected int, got 'x'"):
        v2.from_ext({"a": "g", "e": "x"})
