"""Hostile Raft frames for tests: one-way frames written straight to a member's port.

``source_host`` binds the sending socket to that loopback address, so a test can
send as if from a configured peer's host (127.0.0.x) or from anywhere else.
"""

from __future__ import annotations

import asyncio
import contextlib

from mqcluster.raft.codes import RaftRequestCode
from mqcluster.wire.frame import FLAG_ONEWAY, RemotingCommand, encode_frame
from mqcluster.wire.rpc import split_addr


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
