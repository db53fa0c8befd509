"""Pure codec for remoting frames: ``feed(bytes) -> commands``, ``encode(command) -> bytes``.

The frame is RocketMQ's remoting frame with JSON headers: docs/formats.md,
"Remoting frame".
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import msgspec

DEFAULT_MAX_FRAME_SIZE = 16 * 1024 * 1024

FLAG_RESPONSE = 0x1
FLAG_ONEWAY = 0x2

_LEN = struct.Struct(">I")


class ResponseCode(IntEnum):
    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    INVALID_REQUEST = 4


class FrameError(ValueError):
    """The byte stream is not a valid frame; the connection must be closed."""


@dataclass
class RemotingCommand:
    code: int
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    @classmethod
    def request(
        cls, code: int, ext_fields: dict[str, Any] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        fields = {k: str(v) for k, v in (ext_fields or {}).items() if v is not None}
        return cls(code=code, ext_fields=fields, body=body)

    def response(
        self,
        code: int = ResponseCode.SUCCESS,
        remark: str | None = None,
        ext_fields: dict[str, Any] | None = None,
        body: bytes = b"",
    ) -> RemotingCommand:
        """A response to this request, carrying its opaque."""
        fields = {k: str(v) for k, v in (ext_fields or {}).items() if v is not None}
        return RemotingCommand(
            code=int(code),
            opaque=self.opaque,
            flag=FLAG_RESPONSE,
            remark=remark,
            ext_fields=fields,
            body=body,
        )

    def json_body(self) -> Any:
        """The body decoded as JSON; raises FrameError naming the problem."""
        try:
            return json.loads(self.body.decode("utf-8")) if self.body else None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise FrameError(f"body is not valid JSON: {exc}") from exc
        except RecursionError:
            raise FrameError("body is not valid JSON: nested too deeply") from None


def encode_frame(cmd: RemotingCommand) -> bytes:
    head, body = encode_frame_parts(cmd)
    return head + body


def encode_frame_parts(cmd: RemotingCommand) -> tuple[bytes, bytes]:
    """The frame as (lengths and header, body): joining many frames' parts at once
    copies a large body once instead of twice."""
    hbytes = encode_header(cmd)
    return _head(hbytes, len(cmd.body)), cmd.body


def frame_of(header: bytes, body: bytes = b"") -> bytes:
    """A whole frame from its JSON header (already encoded) and body."""
    return _head(header, len(body)) + body


def _head(header: bytes, body_length: int) -> bytes:
    """The frame's lengths, then its header."""
    return _LEN.pack(4 + len(header) + body_length) + _LEN.pack(len(header)) + header


def decode_frame(data: bytes) -> RemotingCommand:
    """The one frame ``data`` holds; FrameError if it is not exactly one."""
    decoder = FrameDecoder(max(len(data), DEFAULT_MAX_FRAME_SIZE))
    cmds = decoder.feed(data)
    if len(cmds) != 1 or decoder.buffered:
        raise FrameError(f"{len(data)} bytes are not exactly one frame")
    return cmds[0]


def encode_header(cmd: RemotingCommand) -> bytes:
    """The JSON header in UTF-8, as RocketMQ's Java remoting writes it (fastjson, UTF-8):
    every frame has one, and msgspec writes it faster than ``json``."""
    header: dict[str, Any] = {"code": int(cmd.code), "opaque": int(cmd.opaque),
                              "flag": int(cmd.flag), "language": "PYTHON", "version": 0}
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    if cmd.ext_fields:
        header["extFields"] = cmd.ext_fields
    try:
        return _ENCODE(header)
    except (UnicodeEncodeError, TypeError):
        # A lone surrogate (from a peer's JSON escape) has no UTF-8 form; the general
        # encoder escapes it, and names a value that is not a string.
        return json.dumps(header, separators=(",", ":")).encode("ascii")


class _WireHeader(msgspec.Struct):
    """The header fields a frame's reader uses; others (language, version, ...) are ignored."""

    code: int = 0
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    extFields: dict[str, str] | None = None


_ENCODE = msgspec.json.Encoder().encode
_DECODE = msgspec.json.Decoder(_WireHeader).decode


def _decode_header(raw: bytes | memoryview) -> _WireHeader:
    try:
        return _DECODE(raw)
    except msgspec.ValidationError as exc:  # (a DecodeError subclass: caught first)
        raise FrameError(f"header is malformed: {exc}") from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise FrameError(f"header is not valid JSON: {exc}") from None
    except RecursionError:
        # (msgspec descends into a field it then ignores: ``{"x": [[[[...`` 200,000 deep)
        raise FrameError("header is nested too deeply") from None


class FrameDecoder:
    """Incremental decoder: feed bytes, get complete commands.

    Raises FrameError on a malformed or oversized frame; after that the
    decoder is unusable and the caller closes the connection.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[RemotingCommand]:
        # With nothing held back, the frames are read from ``data`` itself and only an
        # incomplete tail is kept: a read of whole frames is not copied into the buffer.
        held = self._buf
        if held:
            held.extend(data)
            src: bytes | bytearray = held
        else:
            src = data
        out: list[RemotingCommand] = []
        pos, size = 0, len(src)
        try:
            with memoryview(src) as view:  # one copy of each body, not two
                while size - pos >= 4:
                    (total,) = _LEN.unpack_from(src, pos)
                    if total > self.max_frame_size:
                        raise FrameError(
                            f"frame of {total} bytes exceeds limit {self.max_frame_size}")
                    if total < 4:
                        raise FrameError(
                            f"frame length {total} is shorter than its header length field")
                    if size - pos < 4 + total:
                        break
                    (hlen_raw,) = _LEN.unpack_from(src, pos + 4)
                    serialize_type, hlen = hlen_raw >> 24, hlen_raw & 0xFFFFFF
                    if serialize_type != 0:
                        raise FrameError(f"unsupported serialize type {serialize_type}")
                    if hlen > total - 4:
                        raise FrameError(f"header length {hlen} exceeds frame length {total}")
                    h = _decode_header(view[pos + 8 : pos + 8 + hlen])
                    body = bytes(view[pos + 8 + hlen : pos + 4 + total])
                    pos += 4 + total
                    out.append(RemotingCommand(h.code, h.opaque, h.flag, h.remark,
                                               h.extFields or {}, body))
        finally:
            # (the frames decoded before an error are gone with it)
            if src is held:
                del held[:pos]
            elif pos < size:
                held.extend(memoryview(data)[pos:])
        return out

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete frame held: only what has arrived, never the length
        its prefix announces."""
        return len(self._buf)

    def reset(self) -> None:
        """Drop the incomplete frame (its connection is closing): frees its memory now."""
        self._buf = bytearray()
