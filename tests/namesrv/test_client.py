"""NamesrvClient and BrokerRegistrar against an in-process NamesrvServer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from mqcluster.client.namesrv import (
    BrokerRegistrar,
    NamesrvClient,
    NamesrvError,
    RegisterOutcome,
    TopicNotExistError,
    parse_addrs,
)
from mqcluster.namesrv.config import NamesrvConfig
from mqcluster.namesrv.server import NamesrvServer
from mqcluster.protocol.namesrv import BrokerRegistration, TopicConfig


def registration(addr: str = "127.0.0.9:10911", bid: int = 0) -> BrokerRegistration:
    return BrokerRegistration(
        clusterName="DefaultCluster",
        brokerName="broker-a",
        brokerAddr=addr,
        brokerId=bid,
        haServerAddr="127.0.0.9:10912",
        topicConfigTable={"TopicTest": TopicConfig(readQueueNums=4, writeQueueNums=4)},
    )


@pytest.fixture
async def servers() -> AsyncIterator[list[NamesrvServer]]:
    out = []
    for _ in range(2):
        srv = NamesrvServer(NamesrvConfig(listenPort=0, bindAddress="127.0.0.1"))
        await srv.start()
        out.append(srv)
    try:
        yield out
    finally:
        for srv in out:
            await srv.stop()


def addrs_of(servers: list[NamesrvServer]) -> list[str]:
    return [srv.address for srv in servers]


async def wait_server_side_closed(srv: NamesrvServer) -> None:
    await asyncio.gather(*(c.wait_closed() for c in list(srv.rpc.connections)))


def test_parse_addrs() -> None:
    assert parse_addrs("a:1; b:2;") == ["a:1", "b:2"]
    assert parse_addrs(["a:1", "b:2,c:3"]) == ["a:1", "b:2", "c:3"]


async def test_register_everywhere_and_query(servers: list[NamesrvServer]) -> None:
    async with NamesrvClient(addrs_of(servers)) as client:
        outcomes = await client.register_broker(registration())
        assert [o.ok for o in outcomes] == [True, True]
        for srv in servers:
            assert srv.routes.topic_list() == ["TopicTest"]
        route = await client.get_route("TopicTest")
        assert route.brokerDatas[0].brokerAddrs == {0: "127.0.0.9:10911"}
        assert route.queueDatas[0].readQueueNums == 4
        info = await client.get_cluster_info()
        assert info.clusterAddrTable == {"DefaultCluster": ["broker-a"]}
        assert await client.get_topic_list() == ["TopicTest"]
        with pytest.raises(TopicNotExistError):
            await client.get_route("Nope")

        slave = await client.register_broker(registration("127.0.0.10:10911", 1))
        assert all(o.result and o.result.masterAddr == "127.0.0.9:10911" for o in slave)

        await client.unregister_broker("DefaultCluster", "broker-a", "127.0.0.9:10911", 0)
        route = await client.get_route("TopicTest")
        assert route.brokerDatas[0].brokerAddrs == {1: "127.0.0.10:10911"}


async def test_query_falls_through_to_a_live_server(servers: list[NamesrvServer]) -> None:
    dead = servers[0].address
    await servers[0].stop()
    async with NamesrvClient([dead, servers[1].address]) as client:
        outcomes = await client.register_broker(registration())
        assert [o.ok for o in outcomes] == [False, True]
        assert await client.get_topic_list() == ["TopicTest"]


async def test_unreachable_raises_namesrv_error() -> None:
    srv = NamesrvServer(NamesrvConfig(listenPort=0, bindAddress="127.0.0.1"))
    await srv.start()
    addr = srv.address
    await srv.stop()
    async with NamesrvClient([addr], connect_timeout=0.5) as client:
        with pytest.raises(NamesrvError, match="cannot connect"):
            await client.get_cluster_info()


async def test_closing_the_connection_drops_the_broker(servers: list[NamesrvServer]) -> None:
    client = NamesrvClient(addrs_of(servers))
    await client.register_broker(registration())
    await client.close()
    for srv in servers:
        await wait_server_side_closed(srv)
        assert srv.routes.topic_list() == []
        assert srv.routes.cluster_info().brokerAddrTable == {}


async def test_registrar_periodic_trigger_and_stop(servers: list[NamesrvServer]) -> None:
    seen: list[list[RegisterOutcome]] = []
    topics = {"TopicTest": TopicConfig()}

    def current() -> BrokerRegistration:
        return registration().model_copy(update={"topicConfigTable": dict(topics)})

    async with NamesrvClient(addrs_of(servers)) as client:
        registrar = BrokerRegistrar(client, current, interval=0.05, on_outcomes=seen.append)
        registrar.start()
        await registrar.wait_rounds(3)
        assert all(o.ok for round_ in seen for o in round_)

        registrar.interval = 3600
        await registrar.wait_rounds(registrar.rounds + 1)
        topics["Added"] = TopicConfig()
        registrar.trigger()
        await registrar.wait_rounds(registrar.rounds + 1)
        assert servers[0].routes.topic_list() == ["Added", "TopicTest"]

        await registrar.stop()
        assert not registrar.running
        for srv in servers:
            assert srv.routes.topic_list() == []


async def test_registrar_registers_again_after_a_name_server_restart() -> None:
    first = NamesrvServer(NamesrvConfig(listenPort=0, bindAddress="127.0.0.1"))
    await first.start()
    addr, port = first.address, first.port
    async with NamesrvClient([addr]) as client:
        registrar = BrokerRegistrar(client, registration, interval=3600)
        registrar.start()
        await registrar.wait_rounds(1)
        await first.stop()
        second = NamesrvServer(NamesrvConfig(listenPort=port, bindAddress="127.0.0.1"))
        await second.start()
        try:
            registrar.trigger()
            await registrar.wait_rounds(2)
            assert all(o.ok for o in registrar.last_outcomes)
            assert second.routes.topic_list() == ["TopicTest"]
            await registrar.stop()
            assert second.routes.topic_list() == []
        finally:
            await second.stop()


async def test_registered_waits_for_a_round_that_starts_after_the_call(
        servers: list[NamesrvServer]) -> None:
    topics = {"TopicTest": TopicConfig()}

    def current() -> BrokerRegistration:
        return registration().model_copy(update={"topicConfigTable": dict(topics)})

    async with NamesrvClient(addrs_of(servers)) as client:
        registrar = BrokerRegistrar(client, current, interval=3600)
        registrar.start()
        await registrar.wait_rounds(1)
        topics["Added"] = TopicConfig()
        await registrar.registered()
        for srv in servers:
            assert srv.routes.topic_list() == ["Added", "TopicTest"]
        await registrar.stop()
