"""A group whose master does not answer (a hung process keeps its TCP open) fails its
calls fast with RocketMQ's status codes, and they go to the new master once one is
known: the proxy's handler in process, in front of stand-in masters."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from mqcluster.proxy.groups import DOWN, GroupTable
from mqcluster.proxy.server import build_handler
from mqcluster.proxy.service import ProxyService, TopicGroups
from mqcluster.proxy.telemetry import TelemetryRelay
from mqcluster.proxy.upstream import SERVICE, Channels, Upstream
from mqcluster_testing.procs import free_addr


class StandInMaster:
    """Answers SendMessage OK, or never (``hung``), as a SIGSTOPped master."""

    def __init__(self, hung: bool) -> None:
        self.hung = hung
        self.release = asyncio.Event()
        self.server = grpc.aio.server()
        self.addr = ""
        self.calls = 0

    async def start(self) -> str:
        async def send(raw: bytes, context: Any) -> bytes:
            self.calls += 1
            if self.hung:
                await self.release.wait()
            return spb.SendMessageResponse(
                status=pb.Status(code=pb.Code.OK),
                entries=[spb.SendResultEntry(status=pb.Status(code=pb.Code.OK),
                                             message_id="M1")]).SerializeToString()

        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            SERVICE, {"SendMessage": grpc.unary_unary_rpc_method_handler(send)}),))
        self.addr = free_addr()
        self.server.add_insecure_port(self.addr)
        await self.server.start()
        return self.addr

    async def stop(self) -> None:
        self.release.set()
        await self.server.stop(0)


@pytest.fixture
async def proxy() -> AsyncIterator[tuple[GroupTable, Any, StandInMaster, StandInMaster]]:
    table = GroupTable(failures_to_down=2)
    channels = Channels()
    up = Upstream(table, channels, call_timeout=0.3, master_wait=0.2)
    service = ProxyService(table, up)
    service._topics["T"] = TopicGroups(frozenset({"g"}), service.clock())  # routes known
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((build_handler(
        service, lambda ctx: TelemetryRelay(table, channels, up, ())),))
    addr = free_addr()
    server.add_insecure_port(addr)
    await server.start()
    hung, healthy = StandInMaster(hung=True), StandInMaster(hung=False)
    await hung.start()
    await healthy.start()
    channel = grpc.aio.insecure_channel(addr)
    try:
        yield table, channel.unary_unary(f"/{SERVICE}/SendMessage"), hung, healthy
    finally:
        await channel.close()
        await server.stop(0)
        await hung.stop()
        await healthy.stop()
        await channels.close()


def send_request() -> bytes:
    return spb.SendMessageRequest(messages=[pb.Message(
        topic=pb.Resource(name="T"), body=b"x")]).SerializeToString()


async def test_a_hung_master_fails_calls_fast_then_the_new_one_serves(
        proxy: tuple[GroupTable, Any, StandInMaster, StandInMaster]) -> None:
    table, send, hung, healthy = proxy
    table.sighted("g", "g0:10911", hung.addr, 1)
    first = spb.SendMessageResponse.FromString(await send(send_request(), timeout=10))
    assert first.status.code == pb.Code.PROXY_TIMEOUT  # the call's own deadline
    second = spb.SendMessageResponse.FromString(await send(send_request(), timeout=10))
    assert second.status.code == pb.Code.PROXY_TIMEOUT
    assert table.health() == {"g": DOWN}
    # Down: the next call does not go to the hung master at all.
    calls = hung.calls
    third = spb.SendMessageResponse.FromString(await send(send_request(), timeout=10))
    assert third.status.code == pb.Code.HA_NOT_AVAILABLE
    assert "unreachable" in third.status.message and "broker group g" in third.status.message
    assert hung.calls == calls
    # The controllers elect another master: a call waiting for one goes to it.
    waiting = asyncio.ensure_future(send(send_request(), timeout=10))
    await asyncio.sleep(0)
    table.sighted("g", "g1:10911", healthy.addr, 2)
    ok = spb.SendMessageResponse.FromString(await waiting)
    assert ok.status.code == pb.Code.OK and ok.entries[0].message_id == "M1"
