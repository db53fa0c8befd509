import json
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqcluster.wire.frame import (
    FrameDecoder,
    FrameError,
    RemotingCommand,
    decode_frame,
    encode_frame,
    encode_header,
)


def frame_with_header(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body


def test_round_trip_keeps_every_field() -> None:
    cmd = RemotingCommand(
        code=1002, opaque=7, flag=1, remark="ok", ext_fields={"a": "1"}, body=b"\x00\xff"
    )
    [out] = FrameDecoder().feed(encode_frame(cmd))
    assert out == cmd


@given(
    st.lists(
        st.tuples(
            st.integers(0, 5000), st.binary(max_size=300), st.dictionaries(st.text(), st.text())
        ),
        max_size=8,
    ),
    st.integers(1, 50),
)
def test_decoder_reassembles_frames_split_at_any_point(items, chunk) -> None:
    cmds = [
        RemotingCommand(code=c, opaque=i, ext_fields=e, body=b) for i, (c, b, e) in enumerate(items)
    ]
    stream = b"".join(encode_frame(c) for c in cmds)
    decoder = FrameDecoder()
    out = []
    for i in range(0, len(stream), chunk):
        out.extend(decoder.feed(stream[i : i + chunk]))
    assert out == cmds
    assert decoder.buffered == 0


@given(st.integers(0, 2**31), st.integers(0, 2**31), st.integers(0, 3),
       st.none() | st.text(), st.dictionaries(st.text(), st.text()))
def test_header_is_compact_utf8_json(code, opaque, flag, remark, ext) -> None:
    cmd = RemotingCommand(code=code, opaque=opaque, flag=flag, remark=remark, ext_fields=ext)
    want = {"code": code, "opaque": opaque, "flag": flag, "language": "PYTHON", "version": 0}
    if remark is not None:
        want["remark"] = remark
    if ext:
        want["extFields"] = ext
    assert encode_header(cmd) == json.dumps(
        want, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def test_a_lone_surrogate_from_a_peer_is_escaped_not_fatal() -> None:
    cmd = RemotingCommand(code=1, remark="bad topic \ud800")
    assert json.loads(encode_header(cmd))["remark"] == "bad topic \ud800"


def test_oversized_frame_is_rejected_before_it_is_buffered() -> None:
    decoder = FrameDecoder(max_frame_size=1024)
    with pytest.raises(FrameError, match="exceeds limit"):
        decoder.feed(struct.pack(">I", 10_000))


def test_header_length_beyond_frame_is_rejected() -> None:
    with pytest.raises(FrameError, match="header length"):
        FrameDecoder().feed(struct.pack(">II", 8, 100) + b"xxxx")


def test_non_json_header_is_rejected() -> None:
    with pytest.raises(FrameError, match="not valid JSON"):
        FrameDecoder().feed(frame_with_header(b"{nope"))


def test_a_header_with_whitespace_around_it_decodes() -> None:
    [cmd] = FrameDecoder().feed(frame_with_header(b' \n{"code": 7, "opaque": 3} ', b"x"))
    assert (cmd.code, cmd.opaque, cmd.body) == (7, 3, b"x")


@pytest.mark.parametrize(
    "header", [b'{"code": 1} x', b'{"code": 1', b"", b"[1]", b'{"code": true}',
               b'{"remark": "\xff"}', b'{"remark": "\\ud800"}', b'{"extFields": ["a"]}'])
def test_a_header_that_is_not_one_json_object_is_rejected(header: bytes) -> None:
    with pytest.raises(FrameError):
        FrameDecoder().feed(frame_with_header(header))


def test_non_integer_code_is_rejected() -> None:
    with pytest.raises(FrameError, match=r"header is malformed: Expected `int`.*\$\.code"):
        FrameDecoder().feed(frame_with_header(json.dumps({"code": "x"}).encode()))


def test_ext_fields_must_be_strings() -> None:
    with pytest.raises(FrameError, match="extFields"):
        FrameDecoder().feed(
            frame_with_header(json.dumps({"code": 1, "extFields": {"a": 1}}).encode())
        )


def test_non_json_serialize_type_is_rejected() -> None:
    header = b"{}"
    raw = struct.pack(">II", 4 + len(header), (1 << 24) | len(header)) + header
    with pytest.raises(FrameError, match="serialize type"):
        FrameDecoder().feed(raw)


def test_response_carries_request_opaque() -> None:
    req = RemotingCommand(code=5, opaque=42)
    resp = req.response(remark="done", ext_fields={"x": 1, "skip": None})
    assert resp.is_response and resp.opaque == 42 and resp.ext_fields == {"x": "1"}


def test_decode_frame_takes_exactly_one_frame() -> None:
    cmd = RemotingCommand(code=3, opaque=4, ext_fields={"k": "v"}, body=b"b")
    assert decode_frame(encode_frame(cmd)) == cmd
    for data in (encode_frame(cmd) * 2, encode_frame(cmd)[:-1], b""):
        with pytest.raises(FrameError, match="not exactly one frame"):
            decode_frame(data)
