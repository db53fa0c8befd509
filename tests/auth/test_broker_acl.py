"""ACL 2.0 on a real ``mqbroker`` process with authentication and authorization on:
the official Python client with credentials, raw gRPC calls signed as it signs them,
and remoting requests signed as AclClientRPCHook signs them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import grpc
import pytest
import pytest_asyncio
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Producer, SimpleConsumer
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc

from mqcluster.auth.credentials import Credentials as Creds
from mqcluster.auth.signature import grpc_authorization
from mqcluster.client import AdminClient
from mqcluster.client.credentials import remoting_signer
from mqcluster.protocol.broker import (
    BrokerResponseCode,
    CreateTopicRequestHeader,
    RequestCode,
    encode_update_topic,
)
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.rpc import RpcClient
from mqcluster_testing.broker.procs import BrokerProc, start_broker
from tests.broker.grpc.client_util import give_thread_an_event_loop, new_message
from tests.namesrv.helpers import mqadmin

ROOT = Creds("root", "root-secret")
ALICE = Creds("alice", "alice-secret")
OPS = Creds("ops", "ops-secret")
WILD = Creds("wild", "wild-secret")

ACL = {
    "users": [{"username": u.access_key, "password": u.secret_key, "userType": "Normal"}
              for u in (ALICE, OPS, WILD)],
    "acls": [
        {"subject": "User:alice", "policies": [{"policyType": "CUSTOM", "entries": [
            {"resource": "Topic:orders*", "actions": ["Pub", "Sub"], "decision": "Allow"},
            {"resource": "Topic:orders-secret", "actions": ["Pub"], "decision": "Deny"},
            {"resource": "Group:g-alice", "actions": ["Sub"], "decision": "Allow"},
            {"resource": "Topic:near", "actions": ["Pub"], "decision": "Allow",
             "sourceIps": ["127.0.0.0/8"]},
            {"resource": "Topic:far", "actions": ["Pub"], "decision": "Allow",
             "sourceIps": ["10.0.0.0/8"]},
        ]}]},
        {"subject": "User:ops", "policies": [{"policyType": "CUSTOM", "entries": [
            {"resource": "Cluster:TestCluster", "actions": ["Update", "Get"],
             "decision": "Allow"},
            {"resource": "Topic:ops-*", "actions": ["Create"], "decision": "Allow"},
        ]}]},
        {"subject": "User:wild", "policies": [{"policyType": "CUSTOM", "entries": [
            {"resource": "Topic:*", "actions": ["Pub"], "decision": "Allow"},
        ]}]},
    ],
}
TOPICS = ("orders-1", "orders-secret", "near", "far", "other")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def broker(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[BrokerProc]:
    tmp = tmp_path_factory.mktemp("acl")
    (tmp / "store" / "config").mkdir(parents=True)
    (tmp / "store" / "config" / "acl.json").write_text(json.dumps(ACL))
    proc = await start_broker(
        tmp, args=("--enable-proxy",), authenticationEnabled="true",
        authorizationEnabled="true",
        initAuthenticationUser=json.dumps({"username": "root", "password": "root-secret"}))
    try:
        async with AdminClient(broker_addr=proc.addr, credentials=ROOT) as admin:
            for topic in TOPICS:
                await admin.create_topic(topic, queue_nums=1)
        yield proc
    finally:
        await proc.kill()


def endpoint(broker: BrokerProc) -> str:
    return f"{broker.ip}:{broker.props['grpcServerPort']}"


@pytest.fixture
def stub(broker: BrokerProc) -> Iterator[service_pb2_grpc.MessagingServiceStub]:
    with grpc.insecure_channel(endpoint(broker)) as ch:
        yield service_pb2_grpc.MessagingServiceStub(ch)


def signed(ak: str, sk: str, at: datetime | None = None) -> tuple[tuple[str, str], ...]:
    stamp = (at or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    return (("x-mq-client-id", "acl-test"), ("x-mq-date-time", stamp),
            ("authorization", grpc_authorization(ak, sk, stamp)))


def send_code(stub: service_pb2_grpc.MessagingServiceStub, topic: str,
              metadata: tuple[tuple[str, str], ...]) -> tuple[int, str]:
    m = pb.Message(body=b"x")
    m.topic.name = topic
    m.system_properties.message_type = pb.MessageType.NORMAL
    resp = stub.SendMessage(spb.SendMessageRequest(messages=[m]), timeout=10,
                            metadata=metadata)
    return resp.status.code, resp.status.message


def official_send_and_receive(address: str, creds: Credentials, topic: str,
                              group: str) -> list[bytes]:
    give_thread_an_event_loop()
    config = ClientConfiguration(address, creds, request_timeout=10)
    producer = Producer(config, (topic,))
    producer.startup()
    try:
        for i in range(3):
            producer.send(new_message(topic, f"m{i}".encode()))
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(config, group, {topic: FilterExpression("*")}, await_duration=2)
    consumer.startup()
    got: list[bytes] = []
    try:
        for _ in range(10):
            for m in consumer.receive(16, 15):
                got.append(m.body)
                consumer.ack(m)
            if len(got) >= 3:
                break
    finally:
        consumer.shutdown()
    return sorted(got)


@pytest.mark.asyncio(loop_scope="module")
async def test_the_official_client_with_credentials_sends_and_receives(
        broker: BrokerProc) -> None:
    got = await asyncio.to_thread(official_send_and_receive, endpoint(broker),
                                  Credentials("alice", "alice-secret"), "orders-1", "g-alice")
    assert got == [b"m0", b"m1", b"m2"]


@pytest.mark.asyncio(loop_scope="module")
async def test_the_official_client_with_a_wrong_secret_gets_unauthorized(
        broker: BrokerProc, caplog: pytest.LogCaptureFixture) -> None:
    """It sends nothing: its route query is answered 40100 (it logs the code and
    message, and raises that it has no route)."""
    with pytest.raises(Exception, match="route"):
        await asyncio.to_thread(official_send_and_receive, endpoint(broker),
                                Credentials("alice", "nope"), "orders-1", "g-alice")
    assert "40100, authentication failed: signature of user 'alice' does not match" \
        in caplog.text


UNAUTHORIZED, FORBIDDEN, OK = pb.Code.UNAUTHORIZED, pb.Code.FORBIDDEN, pb.Code.OK


@pytest.mark.parametrize(("metadata", "code", "says"), [
    (signed("alice", "wrong"), UNAUTHORIZED, "does not match"),
    (signed("mallory", "x"), UNAUTHORIZED, "'mallory' does not exist"),
    (signed("alice", "alice-secret", datetime.now(UTC) - timedelta(hours=1)), UNAUTHORIZED,
     "from the broker's clock"),
    ((("x-mq-client-id", "anon"),), UNAUTHORIZED, "no authorization header"),
])
@pytest.mark.asyncio(loop_scope="module")
async def test_a_call_that_proves_no_user_is_unauthorized(
        stub: service_pb2_grpc.MessagingServiceStub, metadata: tuple[tuple[str, str], ...],
        code: int, says: str) -> None:
    got, message = await asyncio.to_thread(send_code, stub, "orders-1", metadata)
    assert (got, says in message) == (code, True), message


@pytest.mark.parametrize(("user", "topic", "code", "says"), [
    (ALICE, "orders-1", OK, ""),
    (ALICE, "other", FORBIDDEN, "user alice has no right Pub on Topic:other"),
    (ALICE, "orders-secret", FORBIDDEN, "user alice is denied Pub on Topic:orders-secret"),
    (ALICE, "near", OK, ""),
    (ALICE, "far", FORBIDDEN, "no right Pub on Topic:far from 127."),
    (WILD, "other", OK, ""),
    (WILD, "orders-secret", OK, ""),
    (ROOT, "other", OK, ""),
])
@pytest.mark.asyncio(loop_scope="module")
async def test_a_send_needs_pub_on_its_topic(
        stub: service_pb2_grpc.MessagingServiceStub, user: Creds, topic: str, code: int,
        says: str) -> None:
    got, message = await asyncio.to_thread(send_code, stub, topic,
                                           signed(user.access_key, user.secret_key))
    assert got == code, message
    assert says in message


async def remoting(broker: BrokerProc, cmd: RemotingCommand,
                   creds: Creds | None) -> RemotingCommand:
    rpc = RpcClient(signer=remoting_signer(creds) if creds else None)
    try:
        return await rpc.invoke(broker.addr, cmd, 5.0)
    finally:
        await rpc.close()


@pytest.mark.asyncio(loop_scope="module")
async def test_an_anonymous_topic_creation_is_refused(broker: BrokerProc) -> None:
    header = CreateTopicRequestHeader(topic="ops-anon", readQueueNums=1, writeQueueNums=1)
    resp = await remoting(broker, encode_update_topic(header), None)
    assert resp.code == BrokerResponseCode.NO_PERMISSION
    assert "carries no AccessKey" in (resp.remark or "")
    resp = await remoting(broker, encode_update_topic(header), ALICE)
    assert resp.code == BrokerResponseCode.NO_PERMISSION
    assert "no right Create on Topic:ops-anon" in (resp.remark or "")
    async with AdminClient(broker_addr=broker.addr, credentials=ROOT) as admin:
        assert "ops-anon" not in await admin.topic_configs()
    resp = await remoting(broker, encode_update_topic(header), OPS)
    assert resp.code == BrokerResponseCode.SUCCESS, resp.remark


def config_update(**values: str) -> RemotingCommand:
    body = "".join(f"{k}={v}\n" for k, v in values.items()).encode()
    return RemotingCommand.request(RequestCode.UPDATE_BROKER_CONFIG, body=body)


async def broker_config(broker: BrokerProc) -> str:
    resp = await remoting(broker, RemotingCommand.request(RequestCode.GET_BROKER_CONFIG), OPS)
    assert resp.code == BrokerResponseCode.SUCCESS, resp.remark
    return resp.body.decode()


@pytest.mark.asyncio(loop_scope="module")
async def test_a_config_update_needs_update_on_the_cluster(broker: BrokerProc) -> None:
    resp = await remoting(broker, config_update(autoCreateTopicEnable="false"), ALICE)
    assert resp.code == BrokerResponseCode.NO_PERMISSION
    assert "user alice has no right Update on Cluster:TestCluster" in (resp.remark or "")
    assert "autoCreateTopicEnable=True" in await broker_config(broker)
    resp = await remoting(broker, config_update(autoCreateTopicEnable="false"), OPS)
    assert resp.code == BrokerResponseCode.SUCCESS, resp.remark
    text = await broker_config(broker)
    assert "autoCreateTopicEnable=False" in text
    # the bootstrap user's password is not answered
    assert "root-secret" not in text and "initAuthenticationUser=******" in text
    resp = await remoting(broker, config_update(autoCreateTopicEnable="true"), ROOT)
    assert resp.code == BrokerResponseCode.SUCCESS, resp.remark


@pytest.mark.asyncio(loop_scope="module")
async def test_a_forged_signature_on_remoting_is_refused(broker: BrokerProc) -> None:
    cmd = config_update(autoCreateTopicEnable="false")
    remoting_signer(OPS)(cmd)
    cmd.body = b"brokerPermission=4\n"  # changed after signing
    resp = await remoting(broker, cmd, None)
    assert resp.code == BrokerResponseCode.NO_PERMISSION
    assert "signature of user 'ops' does not match" in (resp.remark or "")


@pytest.mark.asyncio(loop_scope="module")
async def test_mqadmin_signs_with_its_credentials(broker: BrokerProc) -> None:
    args = ("updateTopic", "-b", broker.addr, "-t", "ops-cli", "-r", "1", "-w", "1")
    rc, out, err = await mqadmin(*args)
    assert rc != 0 and "code 16" in out + err and "carries no AccessKey" in out + err
    rc, out, err = await mqadmin(*args, "--accessKey", "alice", "--secretKey", "alice-secret")
    assert rc != 0 and "no right Create on Topic:ops-cli" in out + err
    rc, out, err = await mqadmin(*args, "--accessKey", "ops", "--secretKey", "ops-secret")
    assert rc == 0, out + err
    async with AdminClient(broker_addr=broker.addr, credentials=ROOT) as admin:
        assert "ops-cli" in await admin.topic_configs()


@pytest.mark.asyncio(loop_scope="module")
async def test_a_consumer_needs_sub_on_its_topic_and_group(
        stub: service_pb2_grpc.MessagingServiceStub) -> None:
    def assignment(topic: str, group: str) -> tuple[int, str]:
        req = spb.QueryAssignmentRequest()
        req.topic.name, req.group.name = topic, group
        resp = stub.QueryAssignment(req, timeout=10, metadata=signed("alice", "alice-secret"))
        return resp.status.code, resp.status.message

    def receive(group: str) -> tuple[int, str]:
        req = spb.ReceiveMessageRequest(batch_size=1)
        req.group.name = group
        req.message_queue.topic.name = "orders-1"
        (resp, *_) = stub.ReceiveMessage(req, timeout=10,
                                         metadata=signed("alice", "alice-secret"))
        return resp.status.code, resp.status.message

    assert (await asyncio.to_thread(assignment, "orders-1", "g-alice"))[0] == OK
    code, message = await asyncio.to_thread(assignment, "orders-1", "g-other")
    assert code == FORBIDDEN and message.startswith(
        "user alice has no right Sub on Group:g-other from 127.")
    code, message = await asyncio.to_thread(assignment, "other", "g-alice")
    assert code == FORBIDDEN and "no right Sub on Topic:other" in message
    code, message = await asyncio.to_thread(receive, "g-other")
    assert code == FORBIDDEN and "no right Sub on Group:g-other" in message
