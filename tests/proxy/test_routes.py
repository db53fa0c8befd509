"""Routes and assignments merged across groups, pointing at the proxy's endpoint."""

from __future__ import annotations

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from mqcluster.proxy.routes import (
    merge_assignments,
    merge_routes,
    readable_groups,
    status,
    writable_groups,
)

PROXY = pb.Endpoints(scheme=pb.AddressScheme.IPv4,
                     addresses=[pb.Address(host="10.0.0.9", port=8081)])


def queue(group: str, qid: int, perm: int = pb.Permission.READ_WRITE,
          host: str = "10.1.1.1") -> pb.MessageQueue:
    return pb.MessageQueue(
        topic=pb.Resource(name="T"), id=qid, permission=perm,
        broker=pb.Broker(name=group, id=0, endpoints=pb.Endpoints(
            addresses=[pb.Address(host=host, port=8081)])))


def route(*queues: pb.MessageQueue, code: int = pb.Code.OK) -> spb.QueryRouteResponse:
    return spb.QueryRouteResponse(status=status(code), message_queues=list(queues))


def test_every_groups_queues_in_one_route_each_at_the_proxy() -> None:
    merged = merge_routes({
        "b": route(queue("b", 0), queue("b", 1, pb.Permission.READ)),
        "a": route(queue("a", 0)),
    }, "T", PROXY)
    assert merged.status.code == pb.Code.OK
    assert [(q.broker.name, q.id) for q in merged.message_queues] == [("a", 0), ("b", 0),
                                                                        ("b", 1)]
    assert all(q.broker.endpoints == PROXY for q in merged.message_queues)
    assert writable_groups(merged) == {"a", "b"}
    assert readable_groups(merged) == {"a", "b"}


def test_a_group_without_the_topic_or_unreachable_is_left_out() -> None:
    merged = merge_routes({
        "a": route(queue("a", 0)),
        "b": route(code=pb.Code.TOPIC_NOT_FOUND),
        "c": route(code=pb.Code.HA_NOT_AVAILABLE),
    }, "T", PROXY)
    assert merged.status.code == pb.Code.OK
    assert {q.broker.name for q in merged.message_queues} == {"a"}


def test_topic_not_found_only_when_every_group_said_so() -> None:
    assert merge_routes({"a": route(code=pb.Code.TOPIC_NOT_FOUND),
                         "b": route(code=pb.Code.TOPIC_NOT_FOUND)},
                        "T", PROXY).status.code == pb.Code.TOPIC_NOT_FOUND
    mixed = merge_routes({"a": route(code=pb.Code.TOPIC_NOT_FOUND),
                          "b": route(code=pb.Code.HA_NOT_AVAILABLE)}, "T", PROXY)
    assert mixed.status.code == pb.Code.HA_NOT_AVAILABLE
    assert "broker group b" in mixed.status.message


def test_no_group_answering_is_a_fast_status_not_an_empty_route() -> None:
    merged = merge_routes({}, "T", PROXY)
    assert merged.status.code == pb.Code.HA_NOT_AVAILABLE
    assert "T" in merged.status.message


def test_a_read_only_group_gets_no_sends() -> None:
    merged = merge_routes({"a": route(queue("a", 0, pb.Permission.READ)),
                           "b": route(queue("b", 0))}, "T", PROXY)
    assert writable_groups(merged) == {"b"}


def test_assignments_of_every_group() -> None:
    def assignment(group: str) -> spb.QueryAssignmentResponse:
        return spb.QueryAssignmentResponse(
            status=status(pb.Code.OK),
            assignments=[pb.Assignment(message_queue=queue(group, -1))])

    merged = merge_assignments({"b": assignment("b"), "a": assignment("a"),
                                "c": spb.QueryAssignmentResponse(
                                    status=status(pb.Code.PROXY_TIMEOUT))}, "T", PROXY)
    assert merged.status.code == pb.Code.OK
    assert [a.message_queue.broker.name for a in merged.assignments] == ["a", "b"]
    assert all(a.message_queue.broker.endpoints == PROXY for a in merged.assignments)


def test_without_endpoints_in_the_request_the_groups_own_stay() -> None:
    merged = merge_routes({"a": route(queue("a", 0, host="10.1.1.7"))}, "T", None)
    assert merged.message_queues[0].broker.endpoints.addresses[0].host == "10.1.1.7"
