"""One table maps every request type to its resource and action."""

from __future__ import annotations

from pathlib import Path

from rocketmq.grpc_protocol import service_pb2 as spb

from mqcluster.auth.model import Action
from mqcluster.auth.table import GRPC_RULES, REMOTING_RULES, Right, remoting_rights
from mqcluster.protocol.broker import RequestCode
from tests.broker.handlers.harness import remoting_broker


async def test_every_remoting_code_the_broker_serves_has_a_rule(tmp_path: Path) -> None:
    """The codes a broker answers (asked one by one, as ``tests/protocol/test_broker.py``
    asks them) each have their rule here; the table names no code it does not serve."""
    async with remoting_broker(tmp_path) as broker:
        served = await broker.served_codes()
    assert served == set(REMOTING_RULES)
    assert set(REMOTING_RULES) == {int(c) for c in RequestCode}


def test_every_grpc_method_has_a_rule() -> None:
    methods = spb.DESCRIPTOR.services_by_name["MessagingService"].methods_by_name
    assert set(methods) <= set(GRPC_RULES)


def test_rights_name_the_resource_of_the_request() -> None:
    assert remoting_rights(RequestCode.SEND_MESSAGE_V2, {"b": "orders"}, b"", "c") == [
        Right("Topic", "orders", (Action.PUB,))]
    assert remoting_rights(RequestCode.UPDATE_BROKER_CONFIG, {}, b"", "c1") == [
        Right("Cluster", "c1", (Action.UPDATE,))]
    assert remoting_rights(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {},
                           b'{"groupName": "g1"}', "c") == [Right("Group", "g1", (Action.CREATE,))]
    # a code outside the table (replication, role changes) is a cluster update
    assert remoting_rights(1005, {}, b"", "c") == [Right("Cluster", "c", (Action.UPDATE,))]


def test_a_grpc_send_needs_pub_on_every_topic_it_writes() -> None:
    req = spb.SendMessageRequest()
    for topic in ("a", "b", "a"):
        req.messages.add().topic.name = topic
    assert GRPC_RULES["SendMessage"](req) == [Right("Topic", "a", (Action.PUB,)),
                                             Right("Topic", "b", (Action.PUB,))]
