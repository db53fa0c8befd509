from __future__ import annotations

import struct

import pytest

from mqcluster.protocol.messages import (
    CodecError,
    WireMessage,
    decode_batch,
    decode_batch_raw,
    decode_properties,
    decode_pulled,
    decode_single_raw,
    encode_batch,
    encode_properties,
    encode_pulled,
)
from mqcluster.store.message import StoredMessage


def test_properties_round_trip() -> None:
    props = {"TAGS": "TagA", "KEYS": "k1 k2", "a": "", "ü": "日本"}
    text = encode_properties(props)
    assert text == "TAGS\x01TagA\x02KEYS\x01k1 k2\x02a\x01\x02ü\x01日本\x02"
    assert decode_properties(text) == props


def test_properties_reject_separators() -> None:
    with pytest.raises(CodecError):
        encode_properties({"a": "x\x02y"})
    with pytest.raises(CodecError):
        decode_properties("novalue\x02")


def test_batch_round_trip() -> None:
    msgs = [
        WireMessage(b"hello", tags="A", keys=["k1", "k2"], properties={"p": "1"}, flag=3),
        WireMessage(b"\x00" * 1000),
    ]
    out = decode_batch(encode_batch(msgs))
    assert out == msgs


def test_batch_layout_is_rocketmq_batch_format() -> None:
    raw = encode_batch([WireMessage(b"ab", tags="T")])
    total, _magic, _crc, flag, body_len = struct.unpack_from(">IIIII", raw)
    assert total == len(raw) and flag == 0 and body_len == 2
    assert raw[20:22] == b"ab"
    (plen,) = struct.unpack_from(">H", raw, 22)
    assert raw[24:] == b"TAGS\x01T\x02" and plen == 7


MALFORMED_BATCHES = [
    b"",
    b"\x00\x00\x00\x05",
    struct.pack(">IIIII", 100, 0, 0, 0, 1) + b"x",
    struct.pack(">IIIII", 27, 0, 0, 0, 50) + b"x" * 7,
    struct.pack(">IIIII", 23, 0, 1234, 0, 1) + b"x" + b"\x00\x00",
    struct.pack(">IIIII", 25, 0, 0, 0, 1) + b"x" + b"\x00\x02ab",
    struct.pack(">IIIII", 25, 0, 0, 0, 1) + b"x" + b"\x00\x02\xff\xfe",
]
"""Empty, a truncated head, bad totalSize, bad bodyLen, a body CRC mismatch, bad
propertiesLen, properties not UTF-8."""


@pytest.mark.parametrize("data", MALFORMED_BATCHES)
def test_malformed_batches_raise(data: bytes) -> None:
    with pytest.raises(CodecError):
        decode_batch(data)


def _stored(i: int) -> StoredMessage:
    return StoredMessage(
        topic="T",
        queue_id=1,
        body=f"body-{i}".encode(),
        tags="TagA",
        keys=["k"],
        properties={"UNIQ_KEY": f"U{i}", "x": "y"},
        born_timestamp=1000 + i,
        born_host="127.0.0.1:5000",
        msg_id=f"U{i}",
        queue_offset=i,
        commitlog_offset=100 * i,
        store_size=100,
        store_timestamp=2000 + i,
        store_host="127.0.0.2:10911",
        offset_msg_id=f"OFF{i}",
    )


def test_pulled_round_trip() -> None:
    msgs = [_stored(i) for i in range(3)]
    out = decode_pulled(encode_pulled(msgs))
    assert [m.body for m in out] == [m.body for m in msgs]
    assert [m.queue_offset for m in out] == [0, 1, 2]
    first = out[0]
    assert first.tags == "TagA" and first.keys == ["k"]
    assert first.properties == {"UNIQ_KEY": "U0", "x": "y"}
    assert first.msg_id == "U0" and first.offset_msg_id == "OFF0"
    assert first.store_host == "127.0.0.2:10911" and first.born_timestamp == 1000


def test_pulled_truncation_detected() -> None:
    raw = encode_pulled([_stored(1)])
    with pytest.raises(CodecError):
        decode_pulled(raw[:-3])


def test_raw_batch_matches_decoded_batch() -> None:
    msgs = [
        WireMessage(b"hello", tags="A", keys=["k1", "k2"], properties={"p": "1"}, flag=3),
        WireMessage(b"\x00" * 1000),
    ]
    raw = decode_batch_raw(encode_batch(msgs))
    assert raw is not None
    assert raw.bodies == [m.body for m in msgs] and raw.flags == [3, 0]
    assert raw.tags == ["A", None]
    decoded = [WireMessage.from_properties(b, decode_properties(p.decode())) for b, p in
               zip(raw.bodies, raw.properties, strict=True)]
    assert [(m.tags, m.keys, m.properties) for m in decoded] == [
        (m.tags, m.keys, m.properties) for m in msgs
    ]


def test_raw_decoding_falls_back_on_an_empty_tag() -> None:
    assert decode_batch_raw(encode_batch([WireMessage(b"x", properties={"TAGS": ""})])) is None
    assert decode_single_raw(b"x", "TAGS\x01\x02", 0) is None
    single = decode_single_raw(b"x", "TAGS\x01T\x02KEYS\x01a b\x02", 1)
    assert single is not None and single.tags == ["T"] and single.flags == [1]


@pytest.mark.parametrize("data", MALFORMED_BATCHES)
def test_raw_batch_errors_are_the_decoded_ones(data: bytes) -> None:
    with pytest.raises(CodecError) as raw:
        decode_batch_raw(data)
    with pytest.raises(CodecError) as full:
        decode_batch(data)
    assert str(raw.value) == str(full.value)
