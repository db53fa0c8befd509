"""WATCH_MASTERS (protocol/controller_watch.py, controller/watch.py): what a proxy
sends, when the answer is due, what it says, and bodies that are refused."""

from __future__ import annotations

import pytest

from mqcluster.controller.events import ApplyBrokerIdEvent, ElectMasterEvent
from mqcluster.controller.statemachine import ControllerState
from mqcluster.controller.watch import differs, masters_of
from mqcluster.protocol.controller_watch import (
    MAX_WAIT_MS,
    GroupMaster,
    WatchError,
    decode_answer,
    decode_request,
    encode_answer,
    encode_request,
)


def test_a_request_round_trips_and_its_wait_is_capped() -> None:
    assert decode_request(encode_request({"a": 3}, 500)) == ({"a": 3}, 500)
    assert decode_request(encode_request({}, 10**9)) == ({}, MAX_WAIT_MS)


@pytest.mark.parametrize("body, problem", [
    (b"{", "not JSON"),
    (b"[]", "'known'"),
    (b'{"known": {"a": "3"}}', "'known'"),
    (b'{"known": {"a": true}}', "'known'"),
    (b'{"known": {}, "timeoutMillis": -1}', "timeoutMillis"),
    (b'{"known": {}, "timeoutMillis": 1.5}', "timeoutMillis"),
])
def test_a_bad_request_is_refused_naming_the_field(body: bytes, problem: str) -> None:
    with pytest.raises(WatchError, match=problem):
        decode_request(body)


def test_the_answer_is_due_when_any_groups_master_epoch_differs() -> None:
    now = {"a": GroupMaster("a0:1", 2), "b": GroupMaster("b0:1", 1)}
    assert not differs({"a": 2, "b": 1}, now)
    assert differs({"a": 1, "b": 1}, now)  # an election in a
    assert differs({"a": 2}, now)  # a new group
    assert differs({"a": 2, "b": 1, "c": 1}, now)  # a group gone


def test_masters_of_the_state_round_trip() -> None:
    state = ControllerState()
    state.apply(ApplyBrokerIdEvent("c", "a", "10.0.0.1:10911", 1, "r1"))
    state.apply(ApplyBrokerIdEvent("c", "a", "10.0.0.2:10911", 2, "r2"))
    state.apply(ElectMasterEvent("a", 2))
    masters = masters_of(state)
    assert masters["a"].master_address == "10.0.0.2:10911"
    assert masters["a"].replicas == ("10.0.0.1:10911", "10.0.0.2:10911")
    assert decode_answer(encode_answer(masters)) == masters
    with pytest.raises(WatchError):
        decode_answer(b'{"a": {}}')
