"""Every request type -> the resource it touches and the action it needs.

Remoting codes (``mqcluster.protocol.broker.RequestCode``) name where the resource's
name is (an ext field, or the body's ``groupName``); gRPC methods read it from the
parsed request. A right is ``(kind, name, actions)``: any one of ``actions`` suffices
(a route is asked by publishers and subscribers alike). A code not in the table is a
cluster operation (replication, role changes) that needs ``Update`` on the Cluster.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NamedTuple

from mqcluster.auth.model import Action
from mqcluster.protocol.broker import RequestCode


class Right(NamedTuple):
    kind: str
    name: str
    actions: tuple[Action, ...]


class RemotingRule(NamedTuple):
    kind: str
    action: Action
    field: str | None = None
    """The ext field holding the name (``"body:groupName"``: the JSON body's key); None
    for Cluster rules, whose name is the broker's cluster."""


PUB, SUB = Action.PUB, Action.SUB
R = RequestCode

REMOTING_RULES: dict[int, tuple[RemotingRule, ...]] = {
    R.SEND_MESSAGE: (RemotingRule("Topic", PUB, "topic"),),
    R.SEND_MESSAGE_V2: (RemotingRule("Topic", PUB, "b"),),
    R.SEND_BATCH_MESSAGE: (RemotingRule("Topic", PUB, "b"),),
    R.PULL_MESSAGE: (RemotingRule("Topic", SUB, "topic"),
                     RemotingRule("Group", SUB, "consumerGroup")),
    R.QUERY_CONSUMER_OFFSET: (RemotingRule("Topic", SUB, "topic"),
                              RemotingRule("Group", SUB, "consumerGroup")),
    R.UPDATE_CONSUMER_OFFSET: (RemotingRule("Topic", SUB, "topic"),
                               RemotingRule("Group", SUB, "consumerGroup")),
    R.UPDATE_AND_CREATE_TOPIC: (RemotingRule("Topic", Action.CREATE, "topic"),),
    R.DELETE_TOPIC_IN_BROKER: (RemotingRule("Topic", Action.DELETE, "topic"),),
    R.GET_ALL_TOPIC_CONFIG: (RemotingRule("Cluster", Action.LIST),),
    R.UPDATE_BROKER_CONFIG: (RemotingRule("Cluster", Action.UPDATE),),
    R.GET_BROKER_CONFIG: (RemotingRule("Cluster", Action.GET),),
    R.GET_BROKER_RUNTIME_INFO: (RemotingRule("Cluster", Action.GET),),
    R.SEARCH_OFFSET_BY_TIMESTAMP: (RemotingRule("Topic", Action.GET, "topic"),),
    R.GET_MAX_OFFSET: (RemotingRule("Topic", Action.GET, "topic"),),
    R.GET_MIN_OFFSET: (RemotingRule("Topic", Action.GET, "topic"),),
    R.VIEW_MESSAGE_BY_ID: (RemotingRule("Cluster", Action.GET),),
    R.GET_ALL_CONSUMER_OFFSET: (RemotingRule("Cluster", Action.LIST),),
    R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: (
        RemotingRule("Group", Action.CREATE, "body:groupName"),),
    R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: (RemotingRule("Cluster", Action.LIST),),
    R.GET_CONSUMER_CONNECTION_LIST: (RemotingRule("Group", Action.GET, "consumerGroup"),),
    R.GET_PRODUCER_CONNECTION_LIST: (RemotingRule("Group", Action.GET, "producerGroup"),),
    R.DELETE_SUBSCRIPTIONGROUP: (RemotingRule("Group", Action.DELETE, "groupName"),),
    R.GET_CONSUME_STATS: (RemotingRule("Group", Action.GET, "consumerGroup"),),
}

CLUSTER_OPERATION = (RemotingRule("Cluster", Action.UPDATE),)


def _body_key(body: bytes, key: str) -> str:
    try:
        value = json.loads(body).get(key, "")
    except (ValueError, AttributeError):
        return ""
    return value if isinstance(value, str) else ""


def remoting_rights(code: int, fields: dict[str, str], body: bytes,
                    cluster: str) -> list[Right]:
    rights = []
    for rule in REMOTING_RULES.get(code, CLUSTER_OPERATION):
        if rule.field is None:
            name = cluster
        elif rule.field.startswith("body:"):
            name = _body_key(body, rule.field[5:])
        else:
            name = fields.get(rule.field, "")
        rights.append(Right(rule.kind, name, (rule.action,)))
    return rights


def _topic(req: Any) -> str:
    return str(req.topic.name)


def _queue_topic(req: Any) -> str:
    return str(req.message_queue.topic.name)


def _group(req: Any) -> str:
    return str(req.group.name)


def _consume(topic: Callable[[Any], str]) -> Callable[[Any], list[Right]]:
    return lambda req: [Right("Topic", topic(req), (SUB,)), Right("Group", _group(req), (SUB,))]


_CONSUMER_TYPES = {2, 3, 4}  # ClientType PUSH_CONSUMER, SIMPLE_CONSUMER, PULL_CONSUMER


def _heartbeat(req: Any) -> list[Right]:
    if req.client_type in _CONSUMER_TYPES and req.group.name:
        return [Right("Group", _group(req), (SUB,))]
    return []


GRPC_RULES: dict[str, Callable[[Any], list[Right]]] = {
    "QueryRoute": lambda req: [Right("Topic", _topic(req), (PUB, SUB))],
    "Heartbeat": _heartbeat,
    "SendMessage": lambda req: [Right("Topic", t, (PUB,))
                                for t in dict.fromkeys(m.topic.name for m in req.messages)],
    "QueryAssignment": _consume(_topic),
    "ReceiveMessage": _consume(_queue_topic),
    "AckMessage": _consume(_topic),
    "ForwardMessageToDeadLetterQueue": _consume(_topic),
    "PullMessage": _consume(_queue_topic),
    "UpdateOffset": _consume(_queue_topic),
    "GetOffset": _consume(_queue_topic),
    "QueryOffset": lambda req: [Right("Topic", _queue_topic(req), (SUB,))],
    "EndTransaction": lambda req: [Right("Topic", _topic(req), (PUB,))],
    "RecallMessage": lambda req: [Right("Topic", _topic(req), (PUB,))],
    "ChangeInvisibleDuration": _consume(_topic),
    "SyncLiteSubscription": _consume(_topic),
    # authenticated, no resource: the client's session and its end
    "Telemetry": lambda req: [],
    "NotifyClientTermination": lambda req: [],
}
