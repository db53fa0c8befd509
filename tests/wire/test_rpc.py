import asyncio
import struct

import pytest

from mqcluster.wire.frame import RemotingCommand, ResponseCode, encode_frame
from mqcluster.wire.rpc import Answer, HandlerRegistry, RpcClient, RpcError, RpcServer, split_addr


@pytest.fixture
async def echo_server():
    registry = HandlerRegistry()

    async def echo(cmd: RemotingCommand, conn) -> RemotingCommand:
        return cmd.response(ext_fields=cmd.ext_fields, body=cmd.body)

    async def fail(cmd: RemotingCommand, conn) -> RemotingCommand:
        raise ValueError("bad field")

    async def hang(cmd: RemotingCommand, conn) -> RemotingCommand:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    registry.register(1, echo)
    registry.register(2, fail)
    registry.register(3, hang)
    server = RpcServer("127.0.0.1", 0, registry, max_frame_size=4096)
    await server.start()
    yield server
    await server.stop()


async def test_request_response(echo_server) -> None:
    client = RpcClient()
    try:
        resp = await client.invoke(
            f"127.0.0.1:{echo_server.port}", RemotingCommand.request(1, {"k": "v"}, b"hi")
        )
        assert resp.code == ResponseCode.SUCCESS
        assert resp.ext_fields == {"k": "v"} and resp.body == b"hi"
    finally:
        await client.close()


async def test_an_unanswered_request_times_out_and_the_connection_goes_on(echo_server) -> None:
    client = RpcClient()
    addr = f"127.0.0.1:{echo_server.port}"
    try:
        with pytest.raises(RpcError, match="timed out"):
            await client.invoke(addr, RemotingCommand.request(3), timeout=0.2)
        resp = await client.invoke(addr, RemotingCommand.request(1, body=b"after"))
        assert resp.body == b"after"
    finally:
        await client.close()


async def test_a_request_written_as_its_own_frame_gets_its_answer_by_opaque(echo_server) -> None:
    client = RpcClient()
    addr = f"127.0.0.1:{echo_server.port}"
    opaques: list[int] = []

    def frame_for(opaque: int) -> bytes:
        opaques.append(opaque)
        return encode_frame(RemotingCommand(1, opaque, ext_fields={"k": "v"}, body=b"hi"))

    try:
        first = await client.invoke_frame(addr, 1, frame_for)
        second = await client.invoke_frame(addr, 1, frame_for)
        assert opaques[0] != opaques[1]
        assert (first.opaque, first.body, first.ext_fields) == (opaques[0], b"hi", {"k": "v"})
        assert second.opaque == opaques[1]
        conn = await client.connection(addr)
        await conn.close()
        with pytest.raises(RpcError, match="closed"):
            await conn.invoke_frame(1, frame_for)
        assert len(opaques) == 2  # a closed connection builds no frame
    finally:
        await client.close()


async def test_concurrent_requests_are_matched_by_opaque(echo_server) -> None:
    client = RpcClient()
    addr = f"127.0.0.1:{echo_server.port}"
    try:
        resps = await asyncio.gather(
            *(
                client.invoke(addr, RemotingCommand.request(1, body=str(i).encode()))
                for i in range(50)
            )
        )
        assert [r.body for r in resps] == [str(i).encode() for i in range(50)]
    finally:
        await client.close()


async def test_unknown_code_and_handler_errors_get_error_responses(echo_server) -> None:
    client = RpcClient()
    addr = f"127.0.0.1:{echo_server.port}"
    try:
        resp = await client.invoke(addr, RemotingCommand.request(999))
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        resp = await client.invoke(addr, RemotingCommand.request(2))
        assert resp.code == ResponseCode.INVALID_REQUEST and "bad field" in (resp.remark or "")
    finally:
        await client.close()


async def test_malformed_frame_closes_only_that_connection(echo_server, caplog) -> None:
    addr = f"127.0.0.1:{echo_server.port}"
    good = RpcClient()
    try:
        await good.invoke(addr, RemotingCommand.request(1))
        for garbage in (struct.pack(">II", 8, 100) + b"xxxx", struct.pack(">I", 1 << 30)):
            reader, writer = await asyncio.open_connection("127.0.0.1", echo_server.port)
            writer.write(garbage)
            await writer.drain()
            assert await asyncio.wait_for(reader.read(), 5) == b""
            writer.close()
        assert "malformed frame" in caplog.text
        resp = await good.invoke(addr, RemotingCommand.request(1, body=b"still"))
        assert resp.body == b"still"
    finally:
        await good.close()


async def test_unreachable_address_raises_rpc_error() -> None:
    client = RpcClient(connect_timeout=0.5)
    with pytest.raises(RpcError, match="cannot connect"):
        await client.invoke("127.0.0.1:1", RemotingCommand.request(1))


def test_split_addr_names_bad_address() -> None:
    assert split_addr("127.0.0.2:9876") == ("127.0.0.2", 9876)
    with pytest.raises(ValueError, match="not host:port"):
        split_addr("nohost")


async def test_a_connection_serves_at_most_max_in_flight_requests_at_once() -> None:
    registry = HandlerRegistry()
    started: list[bytes] = []
    gate = asyncio.Event()

    async def held(cmd: RemotingCommand, conn) -> RemotingCommand:
        started.append(cmd.body)
        await gate.wait()
        return cmd.response(body=cmd.body)

    registry.register(1, held)
    server = RpcServer("127.0.0.1", 0, registry, max_in_flight=2)
    await server.start()
    client = RpcClient()
    addr = f"127.0.0.1:{server.port}"
    try:
        calls = [asyncio.create_task(client.invoke(addr, RemotingCommand.request(
            1, body=str(i).encode()))) for i in range(5)]
        while len(started) < 2:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # the third stays unread while two are served
        assert started == [b"0", b"1"]
        gate.set()
        resps = await asyncio.gather(*calls)
        assert [r.body for r in resps] == [str(i).encode() for i in range(5)]
        assert started == [str(i).encode() for i in range(5)]
    finally:
        await client.close()
        await server.stop()


class CapturingWriter:
    """A StreamWriter stand-in that keeps what the connection writes."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.closing = False

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        return None

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 5000) if name == "peername" else default


async def answers_to(registry: HandlerRegistry, requests: list[RemotingCommand],
                     expect: int) -> list[RemotingCommand]:
    """Serve ``requests`` arriving in one read; the answers in the order written."""
    from mqcluster.wire.frame import FrameDecoder, encode_frame
    from mqcluster.wire.rpc import Connection

    reader = asyncio.StreamReader()
    for opaque, cmd in enumerate(requests, 1):
        cmd.opaque = opaque
    reader.feed_data(b"".join(encode_frame(c) for c in requests))
    writer = CapturingWriter()
    conn = Connection(reader, writer, registry)  # type: ignore[arg-type]
    decoder = FrameDecoder()
    answers: list[RemotingCommand] = []
    async with asyncio.timeout(5):
        while len(answers) < expect:
            await asyncio.sleep(0)
            answers += decoder.feed(bytes(writer.data))
            writer.data.clear()
    await conn.close()
    return answers


async def test_requests_read_together_reach_a_batch_handler_as_one_list() -> None:
    registry = HandlerRegistry()
    calls: list[list[bytes]] = []

    async def stored_together(cmds: list[RemotingCommand], conn) -> list[RemotingCommand]:
        calls.append([c.body for c in cmds])
        await asyncio.sleep(0)
        return [c.response(body=c.body.upper()) for c in cmds]

    async def echo(cmd: RemotingCommand, conn) -> RemotingCommand:
        return cmd.response(body=cmd.body)

    registry.register_batch(10, stored_together)
    registry.register_batch(11, stored_together)
    registry.register(1, echo)
    requests = [RemotingCommand.request(10, body=b"a"), RemotingCommand.request(1, body=b"e"),
                RemotingCommand.request(11, body=b"b"), RemotingCommand.request(10, body=b"c")]
    answers = await answers_to(registry, requests, 4)
    assert calls == [[b"a", b"b", b"c"]]  # one call, in arrival order, the echo apart
    assert {(a.opaque, a.body) for a in answers} == {(1, b"A"), (2, b"e"), (3, b"B"), (4, b"C")}


async def test_a_batch_handler_may_answer_with_frames_it_encoded_itself() -> None:
    registry = HandlerRegistry()

    async def encoded(cmds: list[RemotingCommand], conn) -> list[Answer]:
        return [encode_frame(c.response(body=c.body * 2)) if c.body != b"z"
                else c.response(body=b"plain") for c in cmds]

    registry.register_batch(10, encoded)
    requests = [RemotingCommand.request(10, body=b"a"), RemotingCommand.request(10, body=b"z")]
    answers = await answers_to(registry, requests, 2)
    assert {(a.opaque, a.body) for a in answers} == {(1, b"aa"), (2, b"plain")}
    # one request dispatched alone (the embedded name server's path) gets a command
    one = RemotingCommand.request(10, body=b"b")
    one.opaque = 9
    answer = await registry.dispatch(one, None)  # type: ignore[arg-type]
    assert answer is not None and (answer.opaque, answer.body) == (9, b"bb")


async def test_a_failing_batch_handler_answers_every_request_with_the_error() -> None:
    registry = HandlerRegistry()

    async def broken(cmds: list[RemotingCommand], conn) -> list[RemotingCommand]:
        raise ValueError("no topic")

    async def short(cmds: list[RemotingCommand], conn) -> list[RemotingCommand]:
        return [cmds[0].response()]

    registry.register_batch(10, broken)
    registry.register_batch(20, short)
    requests = [RemotingCommand.request(10), RemotingCommand.request(10),
                RemotingCommand.request(20), RemotingCommand.request(20)]
    answers = sorted(await answers_to(registry, requests, 4), key=lambda a: a.opaque)
    assert [a.code for a in answers] == [ResponseCode.INVALID_REQUEST] * 2 + \
        [ResponseCode.SYSTEM_ERROR] * 2
    assert "no topic" in (answers[0].remark or "")
    assert "1 answers to 2 requests" in (answers[2].remark or "")
