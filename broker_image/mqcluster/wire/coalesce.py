"""A StreamWriter front that sends the frames written in one turn of the event loop
with one ``send()``.

With many requests in flight on one connection (a pipelining producer, a master
answering the sends its replicas' ack released together), a system call per small
frame is a large part of the cost of each. Frames written during one turn of the
loop are joined and handed to the transport at the end of that turn; order is
kept, so every writer of a connection must go through the same front. A burst
above ``max_pending`` bytes is handed over at once, so the transport's own buffer
(and ``drain``'s back-pressure) keeps seeing it.

A turn that writes many frames (a server answering a pipelined burst) hands them
over every ``max_frames``: the peer starts on the first answers while this side
works on the rest. Held to the end of the turn, the two processes would take turns
instead of overlapping, each idle while the other works through a whole burst.
"""

from __future__ import annotations

import asyncio
from typing import Any


class CoalescingWriter:
    # max_frames=32: 64 sends outstanding reach the broker as two groups it stores
    # together; with 16 the leader spent more CPU per message, and with 64 the two
    # sides took turns (alternating rounds: python -m bench peers).
    def __init__(self, writer: asyncio.StreamWriter, max_pending: int = 256 * 1024,
                 max_frames: int = 32) -> None:
        self._writer = writer
        self._max_pending = max_pending
        self._max_frames = max_frames
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None  # (looked up once: see rpc)

    @property
    def transport(self) -> asyncio.WriteTransport:
        return self._writer.transport

    def write(self, data: bytes) -> None:
        self._pending.append(data)
        self._pending_bytes += len(data)
        if self._pending_bytes >= self._max_pending or len(self._pending) >= self._max_frames:
            self.flush()
        elif not self._scheduled:
            self._scheduled = True
            if self._loop is None:
                self._loop = asyncio.get_running_loop()
            self._loop.call_soon(self._flush_scheduled)

    def _flush_scheduled(self) -> None:
        self._scheduled = False
        self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending.clear()
        self._pending_bytes = 0
        if not self._writer.is_closing():
            self._writer.write(data)

    @property
    def backed_up(self) -> bool:
        """Whether ``drain`` would wait: with nothing buffered in the transport it is not
        paused, and a pipelining caller skips the awaits (and the coroutine) per request."""
        return bool(self._writer.transport.get_write_buffer_size()) or self._writer.is_closing()

    async def drain(self) -> None:
        if self.backed_up:
            await self._writer.drain()

    def is_closing(self) -> bool:
        return self._writer.is_closing()

    def close(self) -> None:
        self.flush()
        self._writer.close()

    async def wait_closed(self) -> None:
        await self._writer.wait_closed()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._writer.get_extra_info(name, default)
