"""Hostile input for every kind of listener, from a seeded generator.

``FrameFuzzer(rng)`` makes the payloads ``chaos.fuzz`` throws at a running group:

- remoting frames (name server, broker, controller, Raft and DLedger ports): well-formed
  frames whose request code is one the project serves and whose ``extFields`` carry the
  project's own header field names with out-of-range, mistyped or oversized values;
  frames with lying lengths, truncated frames, deeply nested or non-JSON headers,
  flipped bits and plain random bytes;
- HA frames: the big-endian handshake, ack and transfer layouts with extreme values;
- HTTP (metrics) requests with malformed lines and headers;
- gRPC requests: each MessagingService method with random or bit-flipped protobuf bytes.

Values never name the scenario's real topic, group or broker names: a well-formed admin
request naming them (delete a topic, wipe write permission) is honoured from anyone until
authentication exists, which is not what the fuzz run measures.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import random
import struct
from collections.abc import Callable
from enum import IntEnum

from mqcluster.wire.frame import FLAG_ONEWAY, RemotingCommand, encode_frame
from mqcluster.wire.header import Header

# Modules whose request codes and header classes the fuzzer draws from.
PROTOCOL_MODULES = (
    "mqcluster.protocol.namesrv",
    "mqcluster.protocol.broker",
    "mqcluster.protocol.dledger",
    "mqcluster.protocol.controller",
    "mqcluster.raft.codes",
    "mqcluster.raft.types",
)

INT_EDGES = (0, 1, -1, 2**31 - 1, 2**31, -(2**31), 2**32, 2**53 + 1, 2**63 - 1, 2**63,
             -(2**63), -(2**63) - 1, 2**64, 2**64 + 1, 10**30, -(10**30))
TEXT_EDGES = ("", " ", "true", "false", "null", "NaN", "Infinity", "-0", "1e309", "0x10",
              "3.5", "1_000", "../../etc/passwd", "a\nb=c", "\x00", "\x01\x02", "%s%n",
              "\ud800", "é" * 3, "${jndi:x}", "DefaultCluster", "TBW102")


@functools.cache
def _protocol() -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Every request code and every header field name the project's protocols declare."""
    codes: set[int] = set()
    names: set[str] = set()
    raft_types = importlib.import_module("mqcluster.raft.types")
    for cls in vars(raft_types).values():  # Raft messages travel as their field names
        if dataclasses.is_dataclass(cls):
            names.update(f.name for f in dataclasses.fields(cls))
    for module_name in PROTOCOL_MODULES:
        module = importlib.import_module(module_name)
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, IntEnum) and \
                    "Request" in value.__name__:
                codes.update(int(m) for m in value)
            elif isinstance(value, int) and not isinstance(value, bool) and \
                    0 < value < 5000:
                codes.add(value)
    stack: list[type[Header]] = [Header]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        names.update(cls.__struct_encode_fields__)
    return tuple(sorted(codes)), tuple(sorted(names))


class FrameFuzzer:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.codes, self.fields = _protocol()

    # ------------------------------------------------------------------ values

    def value(self) -> str:
        r = self.rng.random()
        if r < 0.45:
            return str(self.rng.choice(INT_EDGES) + self.rng.choice((0, 0, 0, 1, -1)))
        if r < 0.75:
            return self.rng.choice(TEXT_EDGES)
        if r < 0.9:
            return str(self.rng.randint(-10, 10_000))
        return "x" * self.rng.choice((256, 4096, 70_000))

    def ext_fields(self) -> dict[str, str]:
        chosen = self.rng.sample(self.fields, self.rng.randint(0, min(8, len(self.fields))))
        return {name: self.value() for name in chosen}

    def body(self) -> bytes:
        return self.rng.randbytes(self.rng.choice((0, 0, 1, 16, 64, 700, 5000)))

    # ------------------------------------------------------------------ remoting

    def command(self) -> RemotingCommand:
        return RemotingCommand(
            code=self.rng.choice(self.codes) if self.rng.random() < 0.9
            else self.rng.choice((-1, 0, 2**31 - 1, 65535)),
            opaque=self.rng.randint(0, 2**31 - 1),
            flag=self.rng.choice((0, 0, FLAG_ONEWAY, 1, 3, 255)),
            remark=self.rng.choice((None, None, self.value())),
            ext_fields=self.ext_fields(), body=self.body())

    def _well_formed(self) -> bytes:
        return encode_frame(self.command())

    def _bit_flipped(self) -> bytes:
        frame = bytearray(encode_frame(self.command()))
        for _ in range(self.rng.randint(1, 4)):
            i = self.rng.randrange(len(frame))
            frame[i] ^= 1 << self.rng.randrange(8)
        return bytes(frame)

    def _lying_length(self) -> bytes:
        frame = encode_frame(self.command())
        total = self.rng.choice((0, 1, 3, 4, len(frame) + 1000, 2**31 - 1, 2**32 - 1))
        header_len = self.rng.choice((0, 2**24 - 1, 2**31, 0x01000010, 2**32 - 1))
        return struct.pack(">II", total, header_len) + frame[8:]

    def _truncated(self) -> bytes:
        frame = encode_frame(self.command())
        return frame[: self.rng.randrange(1, len(frame))]

    def _odd_header(self) -> bytes:
        depth = self.rng.choice((100, 5_000, 200_000))
        header = self.rng.choice((
            b"[" * depth + b"]" * depth,
            b'{"code":' + b'{"a":' * depth + b"1" + b"}" * depth + b"}",
            b"not json at all",
            json.dumps({"code": "310", "opaque": -5, "flag": "x", "extFields": [1, 2]}).encode(),
            json.dumps({"code": 2003, "extFields": {"term": 2**64, "leaderId": None}}).encode(),
            b"\xff\xfe" + self.rng.randbytes(30),
        ))
        return struct.pack(">II", 4 + len(header), len(header)) + header

    def _random(self) -> bytes:
        return self.rng.randbytes(self.rng.randint(1, 2048))

    def remoting(self) -> bytes:
        """One remoting payload (a frame, or bytes that pretend to be one)."""
        makers: tuple[Callable[[], bytes], ...] = (
            self._well_formed, self._well_formed, self._well_formed, self._bit_flipped,
            self._lying_length, self._truncated, self._odd_header, self._random)
        return self.rng.choice(makers)()

    # ------------------------------------------------------------------ HA

    def ha(self) -> bytes:
        """Handshake, ack and transfer layouts (``mqcluster.protocol.ha``), extreme values."""
        def i32() -> int:
            return self.rng.choice((0, 1, 2, 3, 4, -1, 2**31 - 1, -(2**31)))

        def i64() -> int:
            return self.rng.choice((0, 1, -1, 2**40, 2**63 - 1, -(2**63)))
        kind = self.rng.randrange(4)
        if kind == 0:
            return struct.pack(">iiq", i32(), i32(), i64())
        if kind == 1:
            return struct.pack(">iq", i32(), i64())
        if kind == 2:
            return struct.pack(">iiqiqq", i32(), i32(), i64(), i32(), i64(), i64()) + \
                self.body()
        return self._random()

    # ------------------------------------------------------------------ HTTP

    def http(self) -> bytes:
        path = self.rng.choice(("/metrics", "/health", "/", "/" + "a" * 9000, "/%00%ff"))
        method = self.rng.choice(("GET", "POST", "PUT", "XYZ", "GET" * 500))
        headers = self.rng.choice((
            "", "Content-Length: -1\r\n", "Content-Length: 99999999999\r\n",
            "Transfer-Encoding: chunked\r\n\r\nzz\r\n", "X: " + "y" * 70_000 + "\r\n",
            "Host\r\n"))
        line = f"{method} {path} HTTP/1.1\r\n{headers}\r\n"
        return line.encode("utf-8", "surrogateescape") if self.rng.random() < 0.8 \
            else self._random()

    # ------------------------------------------------------------------ gRPC

    def grpc_payload(self, valid: bytes) -> bytes:
        """Random protobuf bytes, or a well-formed request with flipped bits or cut short."""
        r = self.rng.random()
        if r < 0.4 or not valid:
            return self._random()
        data = bytearray(valid)
        if r < 0.7:
            for _ in range(self.rng.randint(1, 6)):
                i = self.rng.randrange(len(data))
                data[i] = self.rng.randrange(256)
            return bytes(data)
        if r < 0.85:
            return bytes(data[: self.rng.randrange(len(data))])
        return valid
