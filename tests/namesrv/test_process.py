"""A real ``mqnamesrv`` process on 127.0.0.x with registering broker stand-ins."""

from __future__ import annotations

import asyncio
import signal
import struct
import time
from pathlib import Path

import pytest

from mqcluster.client.namesrv import NamesrvClient, TopicNotExistError
from mqcluster.protocol.namesrv import BrokerRegistration
from mqcluster_testing.namesrv.standin import StandInBroker
from mqcluster_testing.procs import Procs, free_addr, procs  # noqa: F401
from tests.namesrv.helpers import start_namesrv


def host_of(addr: str) -> str:
    return addr.rsplit(":", 1)[0]


async def test_routes_and_cluster_info_over_tcp(procs: Procs) -> None:  # noqa: F811
    _, ns = await start_namesrv(procs)
    master = StandInBroker([ns], host=host_of(free_addr()))
    slave = StandInBroker([ns], host=host_of(free_addr()), broker_id=1)
    await master.start()
    await slave.start()
    client = NamesrvClient([ns])
    try:
        route = await client.get_route("TopicTest")
        assert route.brokerDatas[0].brokerAddrs == {0: master.addr, 1: slave.addr}
        assert route.brokerDatas[0].proxyAddrs[0] == f"{host_of(master.addr)}:8081"
        assert route.queueDatas[0].writeQueueNums == 4
        info = await client.get_cluster_info()
        assert info.clusterAddrTable == {"DefaultCluster": ["broker-a"]}
        assert await client.get_topic_list() == ["TopicTest"]
        outcome = slave.registrar.last_outcomes[0]
        assert outcome.result is not None and outcome.result.masterAddr == master.addr

        await master.stop()
        route = await client.get_route("TopicTest")
        assert route.brokerDatas[0].brokerAddrs == {1: slave.addr}
    finally:
        await slave.stop()
        await client.close()


async def test_malformed_frames_close_only_that_connection(procs: Procs) -> None:  # noqa: F811
    _, ns = await start_namesrv(procs)
    broker = StandInBroker([ns], host=host_of(free_addr()))
    await broker.start()
    host, port = ns.rsplit(":", 1)
    try:
        for garbage in (
            struct.pack(">I", 0xFFFFFFF0) + b"x" * 8,
            struct.pack(">II", 8, 4) + b"{bad",
            struct.pack(">II", 6, 2) + b"[]",
        ):
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(garbage)
            await writer.drain()
            assert await asyncio.wait_for(reader.read(), 10) == b""
            writer.close()

        async with NamesrvClient([ns]) as client:
            route = await client.get_route("TopicTest")
            assert route.brokerDatas[0].brokerAddrs == {0: broker.addr}
        await broker.registrar.register_once()
        assert all(o.ok for o in broker.registrar.last_outcomes)
    finally:
        await broker.stop()


async def test_config_file_and_broker_expiry(procs: Procs, tmp_path: Path) -> None:  # noqa: F811
    conf = tmp_path / "namesrv.conf"
    conf.write_text(
        "# short expiry for the test\nlistenPort=1\nbrokerChannelExpiredTime=300\n"
        "scanNotActiveBrokerInterval=50\n"
    )
    _, ns = await start_namesrv(procs, conf=conf)
    reg = BrokerRegistration(
        clusterName="C",
        brokerName="b",
        brokerAddr="127.0.0.9:1",
        brokerId=0,
        topicConfigTable={},
    )
    async with NamesrvClient([ns]) as client:
        assert all(o.ok for o in await client.register_broker(reg))
        assert (await client.get_cluster_info()).clusterAddrTable == {"C": ["b"]}
        deadline = time.monotonic() + 15
        while (await client.get_cluster_info()).clusterAddrTable:
            assert time.monotonic() < deadline, "broker never expired"
            await asyncio.sleep(0.05)
        with pytest.raises(TopicNotExistError):
            await client.get_route("TopicTest")


async def test_bad_config_value_fails_naming_the_key(procs: Procs, tmp_path: Path) -> None:  # noqa: F811
    conf = tmp_path / "namesrv.conf"
    conf.write_text("brokerChannelExpiredTime=soon\n")
    p = procs.python("-m", "mqcluster.namesrv.main", "-c", str(conf), name="bad-namesrv")
    rc = await asyncio.to_thread(p.wait, 30)
    out = procs.output(p)
    assert rc == 1
    assert "brokerChannelExpiredTime" in out
    assert "Traceback" not in out


async def test_sigterm_stops_cleanly(procs: Procs) -> None:  # noqa: F811
    p, _ = await start_namesrv(procs)
    p.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(p.wait, 30) == 0
