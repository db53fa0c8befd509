"""Routes and assignments of the whole cluster: each group's answer, merged.

Every group's master answers for its own queues; the proxy joins them, and names
itself (the endpoints the client connected to) as every queue's endpoint, so all of
the client's calls come back to the proxy tier whichever group a queue is in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, TypeVar

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

WRITABLE = frozenset({pb.Permission.WRITE, pb.Permission.READ_WRITE})


def status(code: int, message: str = "") -> pb.Status:
    return pb.Status(code=code, message=message or pb.Code.Name(code))


def no_group_status(topic: str) -> pb.Status:
    return status(pb.Code.HA_NOT_AVAILABLE,
                  f"no broker group with a reachable master answered for {topic!r}")


def failure(statuses: Mapping[str, pb.Status], topic: str) -> pb.Status:
    """What to answer when no group answered OK: TOPIC_NOT_FOUND only if every group
    said so (a group that could not answer may have the topic); else a group's error."""
    if not statuses:
        return no_group_status(topic)
    codes = {s.code for s in statuses.values()}
    if codes == {pb.Code.TOPIC_NOT_FOUND}:
        return next(iter(statuses.values()))
    group, worst = next((g, s) for g, s in sorted(statuses.items())
                        if s.code != pb.Code.TOPIC_NOT_FOUND)
    return status(worst.code, f"broker group {group}: {worst.message}")


def _point_at(queue: pb.MessageQueue, endpoints: pb.Endpoints | None) -> pb.MessageQueue:
    if endpoints is not None and endpoints.addresses:
        queue.broker.endpoints.CopyFrom(endpoints)
    return queue


class _Answer(Protocol):
    @property
    def status(self) -> pb.Status: ...


_A = TypeVar("_A", bound=_Answer)


def _split(answers: Mapping[str, _A], topic: str) -> tuple[dict[str, _A], pb.Status | None]:
    """The groups that answered OK, and, when none did, the status to answer instead."""
    ok = {g: a for g, a in answers.items() if a.status.code == pb.Code.OK}
    if ok:
        return ok, None
    return ok, failure({g: a.status for g, a in answers.items()}, topic)


def merge_routes(answers: Mapping[str, spb.QueryRouteResponse], topic: str,
                 endpoints: pb.Endpoints | None) -> spb.QueryRouteResponse:
    """One route from each group's answer (groups that failed are left out)."""
    ok, failed = _split(answers, topic)
    if failed is not None:
        return spb.QueryRouteResponse(status=failed)
    queues = [_point_at(q, endpoints) for g in sorted(ok) for q in ok[g].message_queues]
    return spb.QueryRouteResponse(status=status(pb.Code.OK), message_queues=queues)


def merge_assignments(answers: Mapping[str, spb.QueryAssignmentResponse], topic: str,
                      endpoints: pb.Endpoints | None) -> spb.QueryAssignmentResponse:
    ok, failed = _split(answers, topic)
    if failed is not None:
        return spb.QueryAssignmentResponse(status=failed)
    out = []
    for g in sorted(ok):
        for a in ok[g].assignments:
            _point_at(a.message_queue, endpoints)
            out.append(a)
    return spb.QueryAssignmentResponse(status=status(pb.Code.OK), assignments=out)


def writable_groups(route: spb.QueryRouteResponse) -> frozenset[str]:
    """Groups with at least one queue a producer may write to."""
    return frozenset(q.broker.name for q in route.message_queues if q.permission in WRITABLE)


def readable_groups(route: spb.QueryRouteResponse) -> frozenset[str]:
    return frozenset(q.broker.name for q in route.message_queues
                     if q.permission in (pb.Permission.READ, pb.Permission.READ_WRITE))
