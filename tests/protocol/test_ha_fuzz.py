"""Property-based fuzzing of the HA stream decoders: whatever bytes arrive, in whatever
pieces, a decoder returns frames within the protocol's limits or raises HAProtocolError."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mqcluster.common.javaints import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from mqcluster.protocol.ha import (
    HAProtocolError,
    HAState,
    MasterFrameDecoder,
    MasterHandshake,
    SlaveAck,
    SlaveFrameDecoder,
    SlaveHandshake,
    Transfer,
)

FUZZ = settings(max_examples=400, deadline=None, derandomize=True)
MAX_BODY = 4096

LONGS = st.one_of(st.integers(INT64_MIN, INT64_MAX),
                  st.sampled_from([-1, 0, 1, INT64_MAX, INT64_MIN, INT64_MAX - 5]))
INTS = st.one_of(st.integers(INT32_MIN, INT32_MAX), st.sampled_from([-1, 0, 1, INT32_MAX]))


def _pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def _decode(decoder: SlaveFrameDecoder | MasterFrameDecoder, data: bytes,
            cuts: list[int]) -> list[Any]:
    """The frames decoded from ``data`` fed in pieces, up to the first refused one."""
    out: list[Any] = []
    try:
        for piece in _pieces(data, cuts):
            out += decoder.feed(piece)
    except HAProtocolError:
        pass
    return out


def feed_slave_frames(data: bytes, cuts: list[int]) -> list[Any]:
    out = _decode(SlaveFrameDecoder(), data, cuts)
    for f in out:
        if isinstance(f, SlaveHandshake):
            assert 1 <= f.broker_id <= INT64_MAX
        else:
            assert isinstance(f, SlaveAck) and 0 <= f.max_offset <= INT64_MAX
    return out


def feed_master_frames(data: bytes, cuts: list[int]) -> list[Any]:
    out = _decode(MasterFrameDecoder(MAX_BODY), data, cuts)
    for f in out:
        if isinstance(f, MasterHandshake):
            assert f.max_offset >= 0 and f.epoch >= 0
            for a, b in itertools.pairwise(f.entries):
                assert a[0] < b[0] and a[1] <= b[1]
            assert all(e >= 0 and 0 <= s <= f.max_offset and e <= f.epoch
                       for e, s in f.entries)
        else:
            assert isinstance(f, Transfer)
            assert 0 <= f.epoch_start_offset <= f.offset <= INT64_MAX - len(f.body)
            assert f.epoch >= 0 and f.confirm_offset >= 0 and len(f.body) <= MAX_BODY
    return out


CUTS = st.lists(st.integers(0, 10_000), max_size=6)


@FUZZ
@given(st.binary(max_size=300), CUTS)
def test_random_bytes_to_the_master(data: bytes, cuts: list[int]) -> None:
    feed_slave_frames(data, cuts)


@FUZZ
@given(st.binary(max_size=300), CUTS)
def test_random_bytes_to_a_slave(data: bytes, cuts: list[int]) -> None:
    feed_master_frames(data, cuts)


def _state(s: int) -> bytes:
    return s.to_bytes(4, "big", signed=True)


@FUZZ
@given(state=st.sampled_from([int(x) for x in HAState] + [-1, 99]), flags=INTS,
       broker_id=LONGS, offset=LONGS, cuts=CUTS)
def test_slave_frames_with_any_field_values(state: int, flags: int, broker_id: int,
                                            offset: int, cuts: list[int]) -> None:
    handshake = _state(state) + flags.to_bytes(4, "big", signed=True) + broker_id.to_bytes(
        8, "big", signed=True)
    ack = _state(state) + offset.to_bytes(8, "big", signed=True)
    frames = feed_slave_frames(handshake + ack, cuts)
    if frames and isinstance(frames[0], SlaveHandshake):
        assert frames[0].broker_id == broker_id


@FUZZ
@given(max_offset=LONGS, epoch=INTS,
       entries=st.lists(st.tuples(INTS, LONGS), max_size=4), cuts=CUTS)
def test_master_handshakes_with_any_field_values(max_offset: int, epoch: int,
                                                 entries: list[tuple[int, int]],
                                                 cuts: list[int]) -> None:
    body = b"".join(e.to_bytes(4, "big", signed=True) + s.to_bytes(8, "big", signed=True)
                    for e, s in entries)
    raw = (_state(HAState.HANDSHAKE) + len(body).to_bytes(4, "big", signed=True)
           + max_offset.to_bytes(8, "big", signed=True) + epoch.to_bytes(4, "big", signed=True)
           + body)
    feed_master_frames(raw, cuts)


@FUZZ
@given(size=st.one_of(st.integers(-5, MAX_BODY + 5), INTS), offset=LONGS, epoch=INTS,
       start=LONGS, confirm=LONGS, body=st.binary(max_size=64), cuts=CUTS)
def test_transfers_with_any_field_values(size: int, offset: int, epoch: int, start: int,
                                         confirm: int, body: bytes, cuts: list[int]) -> None:
    raw = (_state(HAState.TRANSFER) + size.to_bytes(4, "big", signed=True)
           + offset.to_bytes(8, "big", signed=True) + epoch.to_bytes(4, "big", signed=True)
           + start.to_bytes(8, "big", signed=True) + confirm.to_bytes(8, "big", signed=True)
           + body)
    feed_master_frames(raw, cuts)


@FUZZ
@given(data=st.data())
def test_mutated_valid_streams(data: Any) -> None:
    stream = (MasterHandshake(500, 3, ((1, 0), (3, 200))).encode()
              + Transfer(200, 3, 200, 150, b"m" * 40).encode()
              + Transfer(240, 3, 200, 240).encode())
    raw = bytearray(stream)
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    feed_master_frames(bytes(raw), data.draw(CUTS))
    acks = bytearray(SlaveHandshake(2, True).encode() + SlaveAck(77).encode())
    acks[data.draw(st.integers(0, len(acks) - 1))] = data.draw(st.integers(0, 255))
    feed_slave_frames(bytes(acks), data.draw(CUTS))


def test_values_past_the_limits_are_refused() -> None:
    for raw in (
        SlaveHandshake(0).encode(),  # the master's own id
        MasterHandshake(-1, 3, ()).encode(),
        MasterHandshake(100, -2, ()).encode(),
        MasterHandshake(100, 2, ((3, 0),)).encode(),  # an entry past the master's epoch
        MasterHandshake(100, 3, ((3, 200),)).encode(),  # an entry past its max offset
        Transfer(10, -1, 0, 0).encode(),
        Transfer(10, 1, 0, -1).encode(),
        Transfer(INT64_MAX - 3, 1, 0, 0, b"12345").encode(),
    ):
        decoder: Any = SlaveFrameDecoder() if raw[:4] == _state(HAState.HANDSHAKE) and len(
            raw) == 16 else MasterFrameDecoder(MAX_BODY)
        try:
            frames = decoder.feed(raw)
        except HAProtocolError:
            continue
        raise AssertionError(f"accepted {frames}")
