"""A server connection's reader that meters partial frames as the bytes arrive.

The transport hands each chunk it reads to ``feed_data`` at once, for every readable
connection, before any reader task runs: with a thousand connections sending, that is
where memory piles up. So the checks happen there, synchronously: a ``FrameTracker``
follows the frame boundaries (length prefixes only; the ``FrameDecoder`` still decodes),
an oversized frame is refused on its length prefix, and the bytes of the incomplete
frame come out of the server's ``ByteBudget``. A chunk that would exceed it aborts its
connection there and then, and is dropped: what is held never exceeds the budget by more
than one chunk. Whole frames take nothing from the budget: a client whose requests
arrive whole is served however full the budget is.

The reader also notes when the incomplete frame's first byte and the last byte of
anything arrived, for the server's partial-frame deadline and idle limit.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable, Iterable
from typing import Any, SupportsIndex

from mqcluster.wire.budget import ByteBudget
from mqcluster.wire.frame import FrameError

_LEN = struct.Struct(">I")


class LimitExceeded(FrameError):
    """The connection went past one of its server's limits and is closed."""


class FrameTracker:
    """Follows frame boundaries in a byte stream from the length prefixes alone.

    ``partial`` is how many bytes of the current incomplete frame have arrived (0 at a
    boundary). Raises FrameError on a length over ``max_frame_size`` or under 4 (the
    header length field), as soon as the prefix is whole."""

    __slots__ = ("_need", "_prefix", "max_frame_size", "partial")

    def __init__(self, max_frame_size: int) -> None:
        self.max_frame_size = max_frame_size
        self.partial = 0
        self._need = 0  # bytes of the current frame still to come, once its prefix is known
        self._prefix = b""

    def feed(self, data: bytes | bytearray | memoryview) -> bool:
        """Follow ``data``; True if the frame left incomplete began in it."""
        pos, size = 0, len(data)
        began = False
        while pos < size:
            if self.partial == 0:
                if size - pos >= 4:
                    # (the common case: a frame's prefix at hand; a whole frame is skipped)
                    (total,) = _LEN.unpack_from(data, pos)
                    self._check(total)
                    if size - pos >= 4 + total:
                        pos += 4 + total
                        continue
                    self._need = total - (size - pos - 4)
                    self.partial = size - pos
                    return True
                began = True
            if self.partial < 4:
                k = min(4 - self.partial, size - pos)
                self._prefix += bytes(data[pos : pos + k])
                self.partial += k
                pos += k
                if self.partial < 4:
                    break
                (total,) = _LEN.unpack(self._prefix)
                self._prefix = b""
                self._check(total)
                self._need = total
            k = min(self._need, size - pos)
            self._need -= k
            self.partial += k
            pos += k
            if self._need == 0:
                self.partial = 0
        return began and self.partial > 0

    def _check(self, total: int) -> None:
        if total > self.max_frame_size:
            raise LimitExceeded(f"frame of {total} bytes exceeds limit {self.max_frame_size}")
        if total < 4:
            raise FrameError(f"frame length {total} is shorter than its header length field")


class MeteredStreamReader(asyncio.StreamReader):
    """A StreamReader for a server's connection: see the module's docstring."""

    def __init__(self, budget: ByteBudget, max_frame_size: int,
                 clock: Callable[[], float], limit: int) -> None:
        super().__init__(limit=limit)
        self.budget = budget
        self.tracker = FrameTracker(max_frame_size)
        self.clock = clock
        self.held = 0
        """Bytes of the incomplete frame taken from the budget."""
        self.partial_since: float | None = None
        """When the incomplete frame's first byte arrived."""
        self.last_fed = clock()
        """When the last bytes arrived (or the connection was made)."""
        self._refused = False
        self._metered_transport: Any = None  # (uvloop's is no asyncio.Transport)

    def set_transport(self, transport: asyncio.BaseTransport) -> None:
        super().set_transport(transport)
        self._metered_transport = transport

    def feed_data(self, data: Iterable[SupportsIndex]) -> None:
        if self._refused:
            return
        now = self.last_fed = self.clock()
        chunk = data if isinstance(data, (bytes, bytearray, memoryview)) else bytes(data)
        try:
            began = self.tracker.feed(chunk)
        except FrameError as exc:
            self._refuse(exc)
            return
        partial = self.tracker.partial
        grown = partial - self.held
        if grown > 0 and not self.budget.take(grown):
            self._refuse(LimitExceeded(
                f"partial frames of all connections would exceed {self.budget.limit} "
                f"bytes (this one's would be {partial})"))
            return
        if grown < 0:
            self.budget.give(-grown)
        self.held = partial
        if not partial:
            self.partial_since = None
        elif began or self.partial_since is None:
            self.partial_since = now
        super().feed_data(chunk)

    def _refuse(self, exc: FrameError) -> None:
        """Drop this chunk and everything after it; the reader gets ``exc``."""
        self._refused = True
        self.release()
        self.set_exception(exc)
        if self._metered_transport is not None:
            self._metered_transport.abort()

    def release(self) -> None:
        """Give the incomplete frame's bytes back to the budget and drop what is buffered
        (the connection closes). The memory goes now, not when a garbage collection
        finds the connection's reference cycles."""
        if self.held:
            self.budget.give(self.held)
        self.held = 0
        self.partial_since = None
        buffered = getattr(self, "_buffer", None)  # (StreamReader's own buffer)
        if isinstance(buffered, bytearray):
            buffered.clear()
