"""The HA stream of controller mode (RIP-44) as pure codecs.

The frames (handshakes both ways, transfer, ack): docs/formats.md, "HA stream".

``state`` is the sender's HAConnectionState. A transfer with an empty body is a
heartbeat. Decoders take bytes as they arrive (``feed``) and return whole frames;
anything malformed raises ``HAProtocolError`` and the connection is closed.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass
from enum import IntEnum

from mqcluster.common.javaints import INT64_MAX

FLAG_SYNC_FROM_LAST_FILE = 1
FLAG_ASYNC_LEARNER = 2

_SLAVE_HANDSHAKE = struct.Struct(">iiq")
_SLAVE_ACK = struct.Struct(">iq")
_MASTER_HANDSHAKE = struct.Struct(">iiqi")
_EPOCH_ENTRY = struct.Struct(">iq")
_TRANSFER = struct.Struct(">iiqiqq")
_STATE = struct.Struct(">i")

MAX_EPOCH_ENTRIES = 1 << 16


class HAState(IntEnum):
    READY = 0
    HANDSHAKE = 1
    TRANSFER = 2
    SUSPEND = 3
    SHUTDOWN = 4


class HAProtocolError(ValueError):
    """A frame that breaks the protocol; the connection carrying it is closed."""


@dataclass(frozen=True)
class SlaveHandshake:
    broker_id: int
    sync_from_last_file: bool = False
    async_learner: bool = False

    def encode(self) -> bytes:
        flags = (FLAG_SYNC_FROM_LAST_FILE if self.sync_from_last_file else 0) | (
            FLAG_ASYNC_LEARNER if self.async_learner else 0)
        return _SLAVE_HANDSHAKE.pack(HAState.HANDSHAKE, flags, self.broker_id)


@dataclass(frozen=True)
class SlaveAck:
    max_offset: int

    def encode(self) -> bytes:
        return _SLAVE_ACK.pack(HAState.TRANSFER, self.max_offset)


@dataclass(frozen=True)
class MasterHandshake:
    max_offset: int
    epoch: int
    entries: tuple[tuple[int, int], ...]
    """``(epoch, startOffset)`` of every master term, oldest first."""

    def encode(self) -> bytes:
        body = b"".join(_EPOCH_ENTRY.pack(e, s) for e, s in self.entries)
        return _MASTER_HANDSHAKE.pack(HAState.HANDSHAKE, len(body), self.max_offset,
                                      self.epoch) + body


@dataclass(frozen=True)
class Transfer:
    offset: int
    epoch: int
    epoch_start_offset: int
    confirm_offset: int
    body: bytes | memoryview = b""

    def encode(self) -> bytes:
        return self.header() + bytes(self.body)

    def header(self, body_size: int | None = None) -> bytes:
        """The header; ``body_size`` when the body is sent from elsewhere (a file)."""
        return _TRANSFER.pack(HAState.TRANSFER,
                              len(self.body) if body_size is None else body_size,
                              self.offset, self.epoch, self.epoch_start_offset,
                              self.confirm_offset)


SlaveFrame = SlaveHandshake | SlaveAck
MasterFrame = MasterHandshake | Transfer


class _Buffer:
    def __init__(self) -> None:
        self._buf = bytearray()

    def _state(self) -> HAState | None:
        if len(self._buf) < 4:
            return None
        (raw,) = struct.unpack_from(">i", self._buf, 0)
        try:
            return HAState(raw)
        except ValueError:
            raise HAProtocolError(f"unknown HA state {raw}") from None


class SlaveFrameDecoder(_Buffer):
    """Master side: decodes what a slave sends."""

    def feed(self, data: bytes) -> list[SlaveFrame]:
        self._buf += data
        out: list[SlaveFrame] = []
        while (state := self._state()) is not None:
            if state is HAState.HANDSHAKE:
                if len(self._buf) < _SLAVE_HANDSHAKE.size:
                    break
                _, flags, broker_id = _SLAVE_HANDSHAKE.unpack_from(self._buf, 0)
                del self._buf[:_SLAVE_HANDSHAKE.size]
                if flags & ~(FLAG_SYNC_FROM_LAST_FILE | FLAG_ASYNC_LEARNER):
                    raise HAProtocolError(f"unknown handshake flags {flags:#x}")
                if broker_id < 1:  # 0 is the master's id (MixAll.MASTER_ID), in every mode
                    raise HAProtocolError(f"slave broker id {broker_id} is not a slave's")
                out.append(SlaveHandshake(broker_id, bool(flags & FLAG_SYNC_FROM_LAST_FILE),
                                          bool(flags & FLAG_ASYNC_LEARNER)))
            elif state is HAState.TRANSFER:
                if len(self._buf) < _SLAVE_ACK.size:
                    break
                _, offset = _SLAVE_ACK.unpack_from(self._buf, 0)
                del self._buf[:_SLAVE_ACK.size]
                if offset < 0:
                    raise HAProtocolError(f"negative ack offset {offset}")
                out.append(SlaveAck(offset))
            else:
                raise HAProtocolError(f"a slave does not send state {state.name}")
        return out


class MasterFrameDecoder(_Buffer):
    """Slave side: decodes what the master sends; bodies are capped at ``max_body``."""

    def __init__(self, max_body: int) -> None:
        super().__init__()
        self.max_body = max_body

    def feed(self, data: bytes) -> list[MasterFrame]:
        self._buf += data
        frames, used = self.parse(self._buf, 0, len(self._buf))
        # Bodies are views of the buffer, which is about to change: copy them out.
        out: list[MasterFrame] = [
            Transfer(f.offset, f.epoch, f.epoch_start_offset, f.confirm_offset, bytes(f.body))
            if isinstance(f, Transfer) and f.body else f for f in frames]
        del frames  # the views, before the buffer shrinks
        del self._buf[:used]
        return out

    def parse(self, buf: bytearray | bytes, start: int, end: int, *,
              stop_after_handshake: bool = False) -> tuple[list[MasterFrame], int]:
        """The whole frames in ``buf[start:end]`` and the bytes they take. Transfer bodies
        are read-only views of ``buf`` (no copy), valid until ``buf`` is written again."""
        out: list[MasterFrame] = []
        view = memoryview(buf).toreadonly()
        pos = start
        while end - pos >= 4:
            (raw,) = _STATE.unpack_from(buf, pos)
            frame: MasterFrame | None
            if raw == HAState.TRANSFER:
                frame, size = self._transfer(buf, view, pos, end)
            elif raw == HAState.HANDSHAKE:
                frame, size = self._handshake(buf, pos, end)
            else:
                try:
                    name = HAState(raw).name
                except ValueError:
                    raise HAProtocolError(f"unknown HA state {raw}") from None
                raise HAProtocolError(f"a master does not send state {name}")
            if frame is None:
                break
            out.append(frame)
            pos += size
            if stop_after_handshake and isinstance(frame, MasterHandshake):
                break
        return out, pos - start

    def _handshake(self, buf: bytearray | bytes, pos: int, end: int,
                   ) -> tuple[MasterHandshake | None, int]:
        if end - pos < _MASTER_HANDSHAKE.size:
            return None, 0
        _, size, max_offset, epoch = _MASTER_HANDSHAKE.unpack_from(buf, pos)
        if size < 0 or size % _EPOCH_ENTRY.size or size > MAX_EPOCH_ENTRIES * _EPOCH_ENTRY.size:
            raise HAProtocolError(f"bad epoch list size {size}")
        if max_offset < 0 or epoch < 0:
            raise HAProtocolError(f"bad master handshake: max offset {max_offset}, "
                                  f"epoch {epoch}")
        total = _MASTER_HANDSHAKE.size + size
        if end - pos < total:
            return None, 0
        first = pos + _MASTER_HANDSHAKE.size
        entries = tuple(_EPOCH_ENTRY.unpack_from(buf, at)
                        for at in range(first, first + size, _EPOCH_ENTRY.size))
        if any(e < 0 or s < 0 for e, s in entries):
            raise HAProtocolError("negative epoch or start offset in the epoch list")
        if any(b[0] <= a[0] or b[1] < a[1] for a, b in itertools.pairwise(entries)):
            raise HAProtocolError("master epoch entries are not increasing")
        if entries and (entries[-1][0] > epoch or entries[-1][1] > max_offset):
            raise HAProtocolError(f"the last epoch entry {entries[-1]} is past the master's "
                                  f"epoch {epoch} or max offset {max_offset}")
        return MasterHandshake(max_offset, epoch, entries), total

    def _transfer(self, buf: bytearray | bytes, view: memoryview, pos: int, end: int,
                  ) -> tuple[Transfer | None, int]:
        if end - pos < _TRANSFER.size:
            return None, 0
        _, size, offset, epoch, epoch_start, confirm = _TRANSFER.unpack_from(buf, pos)
        if size < 0 or size > self.max_body:
            raise HAProtocolError(f"transfer body of {size} bytes (limit {self.max_body})")
        if offset < 0 or epoch_start < 0 or epoch_start > offset or offset > INT64_MAX - size:
            raise HAProtocolError(f"bad transfer header: offset {offset}, epoch start "
                                  f"{epoch_start}, body of {size} bytes")
        if epoch < 0 or confirm < 0:
            raise HAProtocolError(f"bad transfer header: epoch {epoch}, confirm offset "
                                  f"{confirm}")
        total = _TRANSFER.size + size
        if end - pos < total:
            return None, 0
        body = view[pos + _TRANSFER.size:pos + total] if size else b""
        return Transfer(offset, epoch, epoch_start, confirm, body), total

    @staticmethod
    def frame_size(buf: bytearray | bytes, pos: int, end: int) -> int | None:
        """The size of the transfer frame starting at ``pos`` once its header is in."""
        if end - pos < _TRANSFER.size or _STATE.unpack_from(buf, pos)[0] != HAState.TRANSFER:
            return None
        return _TRANSFER.size + int(_TRANSFER.unpack_from(buf, pos)[1])
