"""Property-based fuzzing of the remoting decoders: any bytes give frames or the decoder's
own error (FrameError), never another exception; what is encoded decodes to itself."""

from __future__ import annotations

import struct
from typing import Annotated

import msgspec
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mqcluster.wire.frame import (
    FrameDecoder,
    FrameError,
    RemotingCommand,
    _decode_header,
    encode_frame,
)
from mqcluster.wire.header import CamelHeader, Header, HeaderError
from mqcluster.wire.metered import FrameTracker

FUZZ = settings(max_examples=100, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])


def frame(header: bytes, body: bytes = b"", *, serialize: int = 0) -> bytes:
    return struct.pack(">II", 4 + len(header) + len(body), (serialize << 24) | len(header)) \
        + header + body


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
headers = st.one_of(
    st.binary(max_size=200),
    json_values.map(lambda v: msgspec.json.encode(v)),
    st.dictionaries(st.sampled_from(["code", "opaque", "flag", "remark", "extFields", "x"]),
                    json_values, max_size=5).map(lambda v: msgspec.json.encode(v)),
)


def feed_all(data: bytes, chunk: int, max_frame: int = 1 << 16) -> list[RemotingCommand]:
    dec = FrameDecoder(max_frame)
    out: list[RemotingCommand] = []
    for i in range(0, len(data), chunk):
        out += dec.feed(data[i : i + chunk])
    return out


@FUZZ
@given(st.binary(max_size=2000), st.integers(1, 64))
@example(b"\x00\x00\x00\x10\x00\x00\x00\x04" + b"[[[[" + b"\x00" * 8, 3)
def test_random_bytes_give_frames_or_a_frame_error(data: bytes, chunk: int) -> None:
    try:
        cmds = feed_all(data, chunk)
    except FrameError:
        return
    assert all(isinstance(c, RemotingCommand) for c in cmds)


@FUZZ
@given(headers, st.binary(max_size=50), st.integers(1, 40), st.integers(0, 3))
def test_frames_with_arbitrary_headers_give_commands_or_a_frame_error(
        header: bytes, body: bytes, chunk: int, serialize: int) -> None:
    try:
        cmds = feed_all(frame(header, body, serialize=serialize), chunk)
    except FrameError:
        return
    assert len(cmds) == 1 and cmds[0].body == body


@pytest.mark.parametrize("depth", [1_000, 200_000])
@pytest.mark.parametrize("where", ["x", "extFields", "remark"])
def test_deeply_nested_headers_are_a_frame_error(depth: int, where: str) -> None:
    header = b'{"code":1,"%s":' % where.encode() + b"[" * depth + b"]" * depth + b"}"
    with pytest.raises(FrameError):
        _decode_header(header)
    with pytest.raises(FrameError):
        FrameDecoder(1 << 30).feed(frame(header))


def test_a_deeply_nested_body_is_a_frame_error() -> None:
    cmd = RemotingCommand(1, body=b"[" * 200_000 + b"]" * 200_000)
    with pytest.raises(FrameError, match="nested too deeply"):
        cmd.json_body()


commands = st.builds(
    RemotingCommand,
    code=st.integers(-(2**31), 2**31 - 1),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(0, 3),
    remark=st.none() | st.text(),
    ext_fields=st.dictionaries(st.text(), st.text(), max_size=5),
    body=st.binary(max_size=300),
)


@FUZZ
@given(st.lists(commands, max_size=6), st.integers(1, 97))
def test_encoded_commands_decode_to_themselves_however_split(
        cmds: list[RemotingCommand], chunk: int) -> None:
    wire = b"".join(encode_frame(c) for c in cmds)
    assert feed_all(wire, chunk, max_frame=1 << 20) == cmds


@FUZZ
@given(st.lists(commands, max_size=6), st.binary(max_size=30), st.integers(1, 97))
def test_the_tracker_holds_what_the_decoder_holds(
        cmds: list[RemotingCommand], tail: bytes, chunk: int) -> None:
    """The metered reader's count of partial bytes is the decoder's tail, at every chunk."""
    wire = b"".join(encode_frame(c) for c in cmds) + tail
    dec, tracker = FrameDecoder(1 << 20), FrameTracker(1 << 20)
    for i in range(0, len(wire), chunk):
        piece = wire[i : i + chunk]
        try:
            dec.feed(piece)
        except FrameError:
            with pytest.raises(FrameError):
                tracker.feed(piece)
            return
        try:
            tracker.feed(piece)
        except FrameError:  # the tracker sees a bad length first (the decoder waits for
            return          # the whole frame before it checks the header length)
        assert tracker.partial == dec.buffered


@FUZZ
@given(st.binary(max_size=3000), st.integers(1, 64))
def test_the_tracker_takes_any_bytes(data: bytes, chunk: int) -> None:
    tracker = FrameTracker(1 << 10)
    try:
        for i in range(0, len(data), chunk):
            tracker.feed(data[i : i + chunk])
    except FrameError:
        return
    assert 0 <= tracker.partial <= 4 + (1 << 10)


class FuzzHeader(CamelHeader):
    topic: Annotated[str, msgspec.Meta(min_length=1, max_length=127)]
    queue_id: Annotated[int, msgspec.Meta(ge=0, le=2**31 - 1)]
    offset: Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)] | None = None
    unit_mode: bool = False
    tags: list[str] | None = None


class PlainHeader(Header):
    group: str = ""
    count: int = 0


ext_values = st.one_of(
    st.text(max_size=30),
    st.integers().map(str),
    st.sampled_from(["", "true", "false", "1e400", "NaN", "[1]", "{}", "-0", " 1"]),
)
ext_dicts = st.dictionaries(
    st.sampled_from(["topic", "queueId", "offset", "unitMode", "tags", "group", "count", "z"])
    | st.text(max_size=10),
    ext_values, max_size=8)


@FUZZ
@given(ext_dicts)
def test_header_decoding_gives_a_header_or_a_header_error(ext: dict[str, str]) -> None:
    for cls in (FuzzHeader, PlainHeader):
        try:
            h = cls.from_ext(ext)
        except HeaderError as exc:
            assert str(exc).startswith(f"bad {cls.__name__}: ")
            continue
        assert cls.from_ext(h.to_ext()) == h


@FUZZ
@given(st.text(min_size=1, max_size=127), st.integers(0, 2**31 - 1),
       st.none() | st.integers(-(2**63), 2**63 - 1), st.booleans())
def test_headers_round_trip(topic: str, queue: int, offset: int | None, unit: bool) -> None:
    h = FuzzHeader(topic=topic, queue_id=queue, offset=offset, unit_mode=unit)
    assert FuzzHeader.from_ext(h.to_ext()) == h
