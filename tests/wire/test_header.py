"""The one header codec: RocketMQ's extFields as typed models."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

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


def test_unknown_fields_are_ignored_and_empty_values_are_absent() -> None:
    h = QueueHeader.from_ext({"topic": "T", "queueId": "1", "commitOffset": "",
                              "bname": "from a newer client"})
    assert h.commitOffset is None
    assert QueueHeader.from_ext({"topic": "", "queueId": "1"}).topic == ""
