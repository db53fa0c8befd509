"""A remoting server's limits: connections, partial-frame bytes, idle connections and
partial-frame deadlines (on a simulated clock), and errors that stay with their connection."""

from __future__ import annotations

import asyncio
import gc
import logging
import struct
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from mqcluster.wire.frame import FrameDecoder, RemotingCommand, encode_frame
from mqcluster.wire.limits import (
    ServerLimits,
    process_limits,
    set_process_limits,
)
from mqcluster.wire.rpc import HandlerRegistry, RpcClient, RpcServer
from tests.wire.pinning import nested_header


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def until(cond: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    """Wait for the server to have handled what a test sent (no event to await there)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


async def closed_by_server(reader: asyncio.StreamReader) -> bool:
    """True once the server closed (EOF or reset); reads whatever it sent first."""
    try:
        while await asyncio.wait_for(reader.read(1 << 16), 5):
            pass
    except ConnectionResetError:
        pass
    return True


def make_registry() -> HandlerRegistry:
    registry = HandlerRegistry()

    async def echo(cmd: RemotingCommand, conn: Any) -> RemotingCommand:
        return cmd.response(body=cmd.body)

    async def hang(cmd: RemotingCommand, conn: Any) -> RemotingCommand:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    registry.register(1, echo)
    registry.register(3, hang)
    return registry


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


async def serve(limits: ServerLimits, clock: FakeClock) -> RpcServer:
    # (the periodic sweep never fires in a test: the test sweeps when its clock says)
    server = RpcServer("127.0.0.1", 0, make_registry(), limits=limits, clock=clock,
                       sweep_interval=3600)
    await server.start()
    return server


@pytest.fixture
async def client() -> AsyncIterator[RpcClient]:
    c = RpcClient()
    yield c
    await c.close()


def partial(announced: int, sent: int) -> bytes:
    """The first ``sent`` bytes of a frame whose prefix announces ``announced`` bytes."""
    return struct.pack(">I", announced) + b"\0" * (sent - 4)


async def echo_ok(client: RpcClient, server: RpcServer, body: bytes = b"hi") -> None:
    resp = await client.invoke(f"127.0.0.1:{server.port}", RemotingCommand.request(1, body=body))
    assert resp.body == body


async def test_an_oversized_frame_is_refused_on_its_length_before_its_bytes_are_held(
        clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    server = await serve(ServerLimits(max_frame_size=4096), clock)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(partial(4097, 3000))
        assert await closed_by_server(reader)
        assert server.budget.used == 0
        assert "frame of 4097 bytes exceeds limit 4096" in caplog.text
    finally:
        await server.stop()


def test_the_decoder_holds_only_what_arrived_never_the_announced_length() -> None:
    dec = FrameDecoder(16 << 20)
    assert dec.feed(partial(16 << 20, 100)) == []
    assert dec.buffered == 100
    dec.reset()
    assert dec.buffered == 0


async def test_connections_past_the_limit_are_refused_and_the_others_served(
        clock: FakeClock, client: RpcClient, caplog: pytest.LogCaptureFixture) -> None:
    server = await serve(ServerLimits(max_connections=3), clock)
    try:
        await echo_ok(client, server)
        held = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(2)]
        await until(lambda: len(server.connections) == 3, "3 connections")
        extra = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(5)]
        for reader, _ in extra:
            assert await closed_by_server(reader)
        assert server.refused == 5
        assert caplog.text.count("refusing connection") == 1  # rate-limited: one line
        await echo_ok(client, server)
        for _, writer in held:
            writer.close()
        await until(lambda: len(server.connections) == 1, "2 closed")
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(encode_frame(RemotingCommand.request(1, body=b"room again")))
        assert b"room again" in await asyncio.wait_for(reader.read(1 << 16), 5)
        writer.close()
    finally:
        await server.stop()


async def test_partial_frames_past_the_server_budget_close_the_connection_that_overflows(
        clock: FakeClock, client: RpcClient, caplog: pytest.LogCaptureFixture) -> None:
    budget = 1 << 20
    server = await serve(ServerLimits(max_frame_size=budget - 4, max_partial_bytes=budget),
                         clock)
    try:
        r1, w1 = await asyncio.open_connection("127.0.0.1", server.port)
        w1.write(partial(budget - 4, 1_000_000))
        await until(lambda: server.budget.used == 1_000_000, "first partial held")
        r2, w2 = await asyncio.open_connection("127.0.0.1", server.port)
        w2.write(partial(budget - 4, 100_000))  # 1.1 MB together: over the 1 MiB budget
        assert await closed_by_server(r2)
        assert "partial frames of all connections would exceed 1048576 bytes" in caplog.text
        assert len(server.connections) == 1  # the first is kept, the budget is its bytes
        assert server.budget.used == 1_000_000
        # The budget is all but spent: frames that arrive whole need none of it.
        await echo_ok(client, server, b"whole frames need no budget" * 1000)
        w1.close()
        await closed_by_server(r1)
        await until(lambda: server.budget.used == 0, "the budget given back")
    finally:
        await server.stop()


async def test_a_partial_frame_past_its_deadline_is_closed_and_a_whole_one_is_not(
        clock: FakeClock, client: RpcClient, caplog: pytest.LogCaptureFixture) -> None:
    server = await serve(ServerLimits(frame_deadline_seconds=30, idle_seconds=0), clock)
    try:
        slow_r, slow_w = await asyncio.open_connection("127.0.0.1", server.port)
        frame = encode_frame(RemotingCommand.request(1, body=b"x" * 100))
        slow_w.write(frame[:10])
        await until(lambda: server.budget.used == 10, "first bytes held")
        await echo_ok(client, server)
        clock.now += 29
        slow_w.write(frame[10:20])  # still trickling: the deadline is from the first byte
        await until(lambda: server.budget.used == 20, "more bytes held")
        assert server.sweep() == 0
        clock.now += 1
        assert server.sweep() == 1
        assert await closed_by_server(slow_r)
        assert "frame not whole 30 s after its first byte (20 bytes arrived" in caplog.text
        assert server.budget.used == 0
        await echo_ok(client, server)  # the other connection: never partial, kept
        assert len(server.connections) == 1
    finally:
        await server.stop()


async def test_the_deadline_restarts_with_each_frame_that_completes(clock: FakeClock) -> None:
    server = await serve(ServerLimits(frame_deadline_seconds=30, idle_seconds=0), clock)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        first = encode_frame(RemotingCommand.request(1, body=b"1"))
        second = encode_frame(RemotingCommand.request(1, body=b"2"))
        writer.write(first[:5])
        await until(lambda: server.budget.used == 5, "a partial frame")
        clock.now += 20
        writer.write(first[5:] + second[:5])  # first completes, second begins now
        assert b"1" in await asyncio.wait_for(reader.read(1 << 16), 5)  # first answered
        await until(lambda: server.budget.used == 5, "the second frame's first bytes")
        clock.now += 20  # 40 s after the first frame began, 20 s after the second
        assert server.sweep() == 0
        clock.now += 10
        assert server.sweep() == 1
        assert await closed_by_server(reader)
    finally:
        await server.stop()


async def test_idle_connections_are_closed_and_busy_ones_kept(
        clock: FakeClock, client: RpcClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mqcluster.wire.rpc")
    server = await serve(ServerLimits(idle_seconds=120, frame_deadline_seconds=0), clock)
    try:
        idle_r, idle_w = await asyncio.open_connection("127.0.0.1", server.port)
        await until(lambda: len(server.connections) == 1, "the idle connection")
        waiting = RpcClient()  # a request being served is not idleness (a long poll)
        addr = f"127.0.0.1:{server.port}"
        hung = asyncio.create_task(waiting.invoke(addr, RemotingCommand.request(3), 600))
        await until(lambda: len(server.connections) == 2, "the waiting connection")
        await echo_ok(client, server)
        clock.now += 119
        await echo_ok(client, server)  # active: its clock starts over
        assert server.sweep() == 0
        clock.now += 1
        assert server.sweep() == 1
        assert await closed_by_server(idle_r)
        [line] = [r for r in caplog.records if "idle for 120 s (limit 120 s)" in r.message]
        assert line.levelno == logging.INFO  # routine, not a warning
        assert not hung.done()
        clock.now += 118
        assert server.sweep() == 0
        clock.now += 1
        assert server.sweep() == 1  # the client, 120 s after it last spoke
        await until(lambda: len(server.connections) == 1, "the client's connection gone")
        assert not hung.done()
        hung.cancel()
        with pytest.raises(asyncio.CancelledError):
            await hung
        await waiting.close()
        idle_w.close()
    finally:
        await server.stop()


async def test_zero_disables_the_idle_and_deadline_limits(clock: FakeClock) -> None:
    server = await serve(ServerLimits(idle_seconds=0, frame_deadline_seconds=0), clock)
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(partial(1000, 10))
        await until(lambda: server.budget.used == 10, "a partial frame")
        clock.now += 10**9
        assert server.sweep() == 0
        writer.close()
    finally:
        await server.stop()


async def test_a_deeply_nested_header_closes_its_connection_and_no_task_fails(
        clock: FakeClock, client: RpcClient, caplog: pytest.LogCaptureFixture) -> None:
    loop = asyncio.get_running_loop()
    failures: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, ctx: failures.append(ctx))
    server = await serve(ServerLimits(), clock)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(nested_header(1))
        assert await closed_by_server(reader)
        assert "nested too deeply" in caplog.text
        await echo_ok(client, server)
        gc.collect()  # a failed task's "never retrieved" report comes when it is freed
        await asyncio.sleep(0)
        assert failures == []
    finally:
        loop.set_exception_handler(None)
        await server.stop()


async def test_close_lines_are_rate_limited_per_kind(
        clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mqcluster.wire.rpc")
    server = await serve(ServerLimits(), clock)
    try:
        async def bad() -> None:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(struct.pack(">II", 8, 4) + b"{bad")
            await closed_by_server(reader)
            writer.close()

        for _ in range(20):
            await bad()
        assert caplog.text.count("malformed frame") == 1
        clock.now += 60
        await bad()
        assert caplog.text.count("malformed frame") == 2
        assert "and 19 more like it" in caplog.text
    finally:
        await server.stop()


async def test_a_server_without_limits_of_its_own_takes_the_process_limits() -> None:
    before = process_limits()
    try:
        set_process_limits(ServerLimits(max_connections=7, idle_seconds=5))
        server = RpcServer("127.0.0.1", 0, HandlerRegistry())
        assert server.limits.max_connections == 7 and server.limits.idle_seconds == 5
        sized = RpcServer("127.0.0.1", 0, HandlerRegistry(), max_frame_size=4096)
        assert sized.limits.max_frame_size == 4096 and sized.limits.max_connections == 7
    finally:
        set_process_limits(before)


def test_limits_that_could_never_read_a_largest_frame_are_refused() -> None:
    with pytest.raises(ValueError, match="max_partial_bytes 1000 cannot hold a frame"):
        ServerLimits(max_frame_size=2000, max_partial_bytes=1000)
    with pytest.raises(ValueError, match="idle_seconds must not be negative"):
        ServerLimits(idle_seconds=-1)
