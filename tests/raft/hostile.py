"""Hostile Raft frames for tests: one-way frames written straight to a member's port.

``source_host`` binds the sending socket to that loopback address, so a test can
send as if from a configured peer's host (127.0.0.x) or from anywhere else.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable

from mqcluster.raft.codes import RaftRequestCode
from mqcluster.wire.frame import FLAG_ONEWAY, RemotingCommand, encode_frame
from mqcluster.wire.rpc import split_addr
from mqcluster_testing.procs import free_addr

QUIET_S = 1.5  # no member may take a sender's term for this long after the frames

View = tuple[object, object] | None
"""A member's (leader, term), None when it does not answer."""
Views = Callable[[], Awaitable[list[View]]]


def heartbeat_frame(src: str, dst: str, term: int | str, **extra: str) -> bytes:
    """The reported frame: a HEARTBEAT_REQUEST (code 2003) with ``term`` in extFields."""
    ext = {"src": src, "dst": dst, "term": str(term), "commit_index": "0", "round": "0", **extra}
    return encode_frame(RemotingCommand(code=RaftRequestCode.HEARTBEAT_REQUEST,
                                        flag=FLAG_ONEWAY, ext_fields=ext))


async def send_frames(addr: str, frames: list[bytes], *, source_host: str | None = None,
                      linger: float = 0.2) -> bool:
    """Write ``frames`` on one connection; True if the member closed it within ``linger``
    seconds afterwards (what it does to a connection that sent a rejected frame)."""
    host, port = split_addr(addr)
    local = (source_host, 0) if source_host else None
    reader, writer = await asyncio.open_connection(host, port, local_addr=local)
    try:
        for frame in frames:
            writer.write(frame)
        await writer.drain()
        try:
            data = await asyncio.wait_for(reader.read(1), linger)
        except TimeoutError:
            return False
        except ConnectionError:
            return True
        return data == b""
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


def host_of(addr: str) -> str:
    return addr.rpartition(":")[0]


def stranger_host(peer_addrs: Iterable[str]) -> str:
    """A free loopback address that is no peer's host."""
    taken = {host_of(a) for a in peer_addrs}
    host = host_of(free_addr())
    while host in taken:
        host = host_of(free_addr())
    return host


async def settled(views: Views) -> tuple[str, int]:
    """Once every member answers and follows one leader: its id and the term."""
    async with asyncio.timeout(60):
        while True:
            seen = set(await views())
            view = seen.pop() if len(seen) == 1 else None
            if view is not None:
                leader, term = view
                if isinstance(leader, str) and isinstance(term, int):
                    return leader, term
            await asyncio.sleep(0.05)


async def unmoved(views: Views, names: list[str], logs: Callable[[], str]) -> None:
    """For QUIET_S seconds every member answers and none took a sender's term (all stay
    far below 1000, the smallest term sent: on a loaded machine a member may still start
    an election of its own), then they follow one leader again."""
    deadline = time.monotonic() + QUIET_S
    while time.monotonic() < deadline:
        for name, view in zip(names, await views(), strict=True):
            assert view is not None, f"{name} stopped answering\n{logs()}"
            term = view[1]
            assert isinstance(term, int) and term < 1000, f"{name} took term {term}\n{logs()}"
        await asyncio.sleep(0.1)
    await settled(views)
