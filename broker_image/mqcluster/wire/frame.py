"""Pure codec for remoting frames: ``feed(bytes) -> commands``, ``encode(command) -> bytes``.

Layout (big-endian), as RocketMQ's remoting protocol with JSON headers:

    total_length(4) header_length(4) header(JSON) body

``total_length`` counts everything after itself. The high byte of
``header_length`` is the serialize type; only 0 (JSON) is accepted.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from json.encoder import encode_basestring_ascii as _quote
from json.scanner import make_scanner
from typing import Any

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


def encode_frame(cmd: RemotingCommand) -> bytes:
    head, body = encode_frame_parts(cmd)
    return head + body


def encode_frame_parts(cmd: RemotingCommand) -> tuple[bytes, bytes]:
    """The frame as (lengths and header, body): joining many frames' parts at once
    copies a large body once instead of twice."""
    hbytes = encode_header(cmd)
    total = 4 + len(hbytes) + len(cmd.body)
    return _LEN.pack(total) + _LEN.pack(len(hbytes)) + hbytes, cmd.body


def encode_header(cmd: RemotingCommand) -> bytes:
    """The JSON header, byte for byte what ``json.dumps(..., separators=(",", ":"))``
    writes for it, built directly: every frame has one, and the general encoder costs
    several times more per call than the few strings it escapes here."""
    parts = [f'{{"code":{int(cmd.code)},"opaque":{int(cmd.opaque)},"flag":{int(cmd.flag)},'
             '"language":"PYTHON","version":0']
    if cmd.remark is not None:
        parts.append(',"remark":' + _quote(cmd.remark))
    if cmd.ext_fields:
        parts.append(',"extFields":{'
                     + ",".join([_quote(k) + ":" + _quote(v) for k, v in cmd.ext_fields.items()])
                     + "}")
    parts.append("}")
    return "".join(parts).encode("ascii")


# (typeshed types make_scanner's argument as the scanner class itself)
_SCAN: Callable[[str, int], tuple[Any, int]] = make_scanner(
    json.JSONDecoder())  # type: ignore[arg-type]


def _decode_header(raw: bytes | memoryview) -> dict[str, Any]:
    try:
        text = str(raw, "utf-8")
        # The scanner alone: about half of what ``json.loads`` costs on a header.
        # Anything it does not take whole (whitespace around the object) goes through
        # ``json.loads``, which also words the error.
        try:
            header, end = _SCAN(text, 0)
        except StopIteration:
            end = -1
        if end != len(text):
            header = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FrameError(f"header is not valid JSON: {exc}") from exc
    if not isinstance(header, dict):
        raise FrameError("header is not a JSON object")
    for key in ("code", "opaque", "flag"):
        value = header.get(key, 0)
        if type(value) is not int:  # (bool is a subclass of int: not accepted)
            raise FrameError(f"header field {key!r} must be an integer, got {value!r}")
    ext = header.get("extFields") or {}
    if not isinstance(ext, dict):
        raise FrameError("header field 'extFields' must map strings to strings")
    for value in ext.values():  # (JSON object keys are always strings)
        if type(value) is not str:
            raise FrameError("header field 'extFields' must map strings to strings")
    remark = header.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise FrameError("header field 'remark' must be a string")
    return header


class FrameDecoder:
    """Incremental decoder: feed bytes, get complete commands.

    Raises FrameError on a malformed or oversized frame; after that the
    decoder is unusable and the caller closes the connection.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[RemotingCommand]:
        buf = self._buf
        buf.extend(data)
        out: list[RemotingCommand] = []
        pos, size = 0, len(buf)
        try:
            with memoryview(buf) as view:  # one copy of each body, not two
                while size - pos >= 4:
                    (total,) = _LEN.unpack_from(buf, pos)
                    if total > self.max_frame_size:
                        raise FrameError(
                            f"frame of {total} bytes exceeds limit {self.max_frame_size}")
                    if total < 4:
                        raise FrameError(
                            f"frame length {total} is shorter than its header length field")
                    if size - pos < 4 + total:
                        break
                    (hlen_raw,) = _LEN.unpack_from(buf, pos + 4)
                    serialize_type, hlen = hlen_raw >> 24, hlen_raw & 0xFFFFFF
                    if serialize_type != 0:
                        raise FrameError(f"unsupported serialize type {serialize_type}")
                    if hlen > total - 4:
                        raise FrameError(f"header length {hlen} exceeds frame length {total}")
                    header = _decode_header(view[pos + 8 : pos + 8 + hlen])
                    body = bytes(view[pos + 8 + hlen : pos + 4 + total])
                    pos += 4 + total
                    get = header.get
                    out.append(RemotingCommand(get("code", 0), get("opaque", 0), get("flag", 0),
                                               get("remark"), get("extFields") or {}, body))
        finally:
            del buf[:pos]  # (the frames decoded before an error are gone with it)
        return out

    @property
    def buffered(self) -> int:
        return len(self._buf)
