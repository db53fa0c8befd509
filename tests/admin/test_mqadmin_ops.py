"""mqadmin's operations subcommands, run as a user runs them, against a real name server
and broker, with the official client producing and consuming."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mqcluster_testing.broker.procs import (
    BrokerProc,
    NamesrvProc,
    free_port,
    start_broker,
    start_namesrv,
)
from tests.broker.grpc.client_util import new_message, producer, simple_consumer
from tests.namesrv.helpers import mqadmin

pytestmark = pytest.mark.slow


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[NamesrvProc, BrokerProc]]:
    ns = await start_namesrv(tmp_path)
    ip = ns.addr.rsplit(":", 1)[0]
    broker = await start_broker(tmp_path, ip, namesrvAddr=ns.addr, enableProxy="true",
                                grpcServerPort=str(free_port(ip)))
    try:
        yield ns, broker
    finally:
        await broker.kill()
        await ns.kill()


def grpc_of(b: BrokerProc) -> str:
    return f"{b.ip}:{b.props['grpcServerPort']}"


async def admin(*args: str) -> str:
    rc, out, err = await mqadmin(*args)
    assert rc == 0, err
    return out


async def admin_json(*args: str) -> object:
    return json.loads(await admin(*args, "--json"))


async def test_broker_and_group_operations(cluster: tuple[NamesrvProc, BrokerProc]) -> None:
    ns, b = cluster
    out = await admin("updateSubGroup", "-n", ns.addr, "-b", b.addr, "-g", "OrderedGroup",
                      "-o", "true")
    assert "OrderedGroup" in out and "True" in out
    data = await admin_json("updateTopic", "-n", ns.addr, "-b", b.addr, "-t", "OpsTopic",
                            "-r", "2", "-w", "2")
    assert data

    status = await admin_json("brokerStatus", "-n", ns.addr, "-b", b.addr)
    assert status[b.addr]["brokerName"] == "broker-a"  # type: ignore[index]
    config = await admin_json("getBrokerConfig", "-b", b.addr)
    assert config[b.addr]["autoCreateTopicEnable"] == "True"  # type: ignore[index]
    await admin("updateBrokerConfig", "-b", b.addr, "-k", "autoCreateTopicEnable",
                "-v", "false")
    config = await admin_json("getBrokerConfig", "-b", b.addr)
    assert config[b.addr]["autoCreateTopicEnable"] == "False"  # type: ignore[index]
    rc, _, err = await mqadmin("updateBrokerConfig", "-b", b.addr, "-k", "listenPort",
                               "-v", "1")
    assert rc == 1 and "'listenPort' takes effect only after a restart" in err
    rc, _, err = await mqadmin("updateBrokerConfig", "-b", b.addr, "-k", "noSuchKey",
                               "-v", "1")
    assert rc == 1 and "unknown broker config key 'noSuchKey'" in err
    rc, _, err = await mqadmin("updateBrokerConfig", "-b", b.addr, "-k", "brokerPermission",
                               "-v", "9")
    assert rc == 1 and "'brokerPermission'" in err

    with producer(grpc_of(b), ("OpsTopic",)) as p:
        receipts = [await asyncio.to_thread(p.send, new_message("OpsTopic", f"m{i}".encode(),
                                                                   keys=(f"k{i}",)))
                    for i in range(4)]
        conns = await admin_json("producerConnection", "-n", ns.addr, "-g", "any",
                                 "-t", "OpsTopic")
        assert [c["kind"] for c in conns["connectionSet"]] == ["PRODUCER"]  # type: ignore[index]

    with simple_consumer(grpc_of(b), "ProgressGroup", "OpsTopic") as c:
        got = await asyncio.to_thread(c.receive, 2, 10)
        for m in got:
            await asyncio.to_thread(c.ack, m)
        conns = await admin_json("consumerConnection", "-n", ns.addr, "-g", "ProgressGroup")
        assert len(conns["connectionSet"]) == 1  # type: ignore[index]

    async def progress() -> dict[str, object]:
        data = await admin_json("consumerProgress", "-n", ns.addr, "-g", "ProgressGroup",
                                "-t", "OpsTopic")
        assert isinstance(data, dict)
        return data

    for _ in range(100):  # offsets are committed behind the acks
        data = await progress()
        if data["diffTotal"] == 4 - len(got):
            break
        await asyncio.sleep(0.1)
    assert data["diffTotal"] == 4 - len(got)
    assert sum(r["brokerOffset"] for r in data["offsetTable"]) == 4  # type: ignore[attr-defined]

    offset_id = receipts[0].message_id
    assert offset_id  # the client's id is a unique key, not an offset id
    text = await admin("queryMsgById", "-i", _offset_msg_id(b, 0))
    assert "OpsTopic" in text and "m0" in text
    rc, _, err = await mqadmin("queryMsgById", "-i", "not-an-id")
    assert rc == 1 and "is not an offset message id" in err


async def test_write_permission_and_topic_deletion(
        cluster: tuple[NamesrvProc, BrokerProc]) -> None:
    ns, b = cluster
    await admin("updateTopic", "-n", ns.addr, "-b", b.addr, "-t", "PermTopic")

    async def perm() -> int:
        route = await admin_json("topicRoute", "-n", ns.addr, "-t", "PermTopic")
        return int(route["queueDatas"][0]["perm"])  # type: ignore[index]

    for _ in range(50):
        if await perm() == 6:
            break
        await asyncio.sleep(0.1)
    out = await admin("wipeWritePerm", "-n", ns.addr, "-b", "broker-a")
    assert "wipe write perm of broker[broker-a]" in out
    assert await perm() == 4
    await asyncio.sleep(1.5)  # a registration round later the wipe still holds
    assert await perm() == 4
    await admin("addWritePerm", "-n", ns.addr, "-b", "broker-a")
    assert await perm() == 6
    out = await admin("deleteTopic", "-n", ns.addr, "-c", "TestCluster", "-t", "PermTopic")
    assert "delete topic [PermTopic] from cluster [TestCluster] success." in out
    rc, _, _ = await mqadmin("topicRoute", "-n", ns.addr, "-t", "PermTopic")
    assert rc == 1


def _offset_msg_id(b: BrokerProc, offset: int) -> str:
    a, bb, c, d = (int(x) for x in b.ip.split("."))
    port = int(b.props["listenPort"])
    return f"{a:02X}{bb:02X}{c:02X}{d:02X}{port:08X}{offset:016X}"
