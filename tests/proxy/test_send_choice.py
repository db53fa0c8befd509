"""Which group a send goes to: round robin over the groups that answer, a FIFO
message group always to the same group."""

from __future__ import annotations

import pytest
from google.protobuf.message import DecodeError
from hypothesis import given
from hypothesis import strategies as st

from mqcluster.proxy.groups import GroupTable
from mqcluster.proxy.service import ProxyService
from mqcluster.proxy.upstream import Channels, Upstream


def service(*groups: str) -> tuple[ProxyService, GroupTable]:
    table = GroupTable(failures_to_down=1)
    for g in groups:
        table.sighted(g, f"{g}:10911", f"{g}:8081", 1)
    return ProxyService(table, Upstream(table, Channels(), 1.0, 1.0)), table


def test_sends_rotate_over_the_groups_and_skip_one_that_stopped_answering() -> None:
    s, table = service("a", "b", "c")
    firsts = [s.send_candidates(frozenset({"a", "b", "c"}), None)[0] for _ in range(6)]
    assert sorted(firsts) == ["a", "a", "b", "b", "c", "c"]
    table.failed("b", "b:8081", "probe: DEADLINE_EXCEEDED")
    for _ in range(4):
        candidates = s.send_candidates(frozenset({"a", "b", "c"}), None)
        assert "b" not in candidates and len(candidates) == 2


def test_with_no_group_answering_every_writable_group_is_still_tried() -> None:
    s, table = service("a")
    table.failed("a", "a:8081", "x")
    assert s.send_candidates(frozenset({"a"}), None) == ["a"]
    assert s.send_candidates(frozenset(), None) == []


@given(message_group=st.text(min_size=1, max_size=20))
def test_a_message_group_always_goes_to_one_group_whatever_its_health(
        message_group: str) -> None:
    s, table = service("a", "b", "c")
    groups = frozenset({"a", "b", "c"})
    first = s.send_candidates(groups, message_group)
    assert len(first) == 1
    for g in ("a", "b", "c"):
        table.failed(g, f"{g}:8081", "x")  # order beats availability for FIFO
    assert s.send_candidates(groups, message_group) == first


@given(topics=st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=4),
       body=st.binary(max_size=3000), group=st.none() | st.text(min_size=1, max_size=10))
def test_the_first_message_is_read_alone_as_the_whole_request_has_it(
        topics: list[str], body: bytes, group: str | None) -> None:
    from rocketmq.grpc_protocol import definition_pb2 as pb
    from rocketmq.grpc_protocol import service_pb2 as spb

    from mqcluster.proxy.service import first_message

    msgs = [pb.Message(topic=pb.Resource(name=t), body=body) for t in topics]
    if group is not None:
        msgs[0].system_properties.message_group = group
    raw = spb.SendMessageRequest(messages=msgs).SerializeToString()
    assert first_message(raw) == msgs[0]
    assert first_message(b"") is None
    with pytest.raises(DecodeError):  # cut inside the first message: BAD_REQUEST
        first_message(raw[:3])
