"""The HA stream's frames on bytes: round trips, split reads, and malformed input."""

from __future__ import annotations

import struct

import pytest

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


def test_slave_frames_round_trip_byte_by_byte() -> None:
    frames = [SlaveHandshake(7, sync_from_last_file=True, async_learner=True), SlaveAck(1234)]
    wire = b"".join(f.encode() for f in frames)
    assert len(frames[0].encode()) == 16 and len(frames[1].encode()) == 12
    dec = SlaveFrameDecoder()
    got = [f for b in wire for f in dec.feed(bytes([b]))]
    assert got == frames


def test_master_frames_round_trip() -> None:
    frames = [MasterHandshake(900, 3, ((1, 0), (3, 500))),
              Transfer(500, 3, 500, 400, b"x" * 100), Transfer(600, 3, 500, 600)]
    wire = b"".join(f.encode() for f in frames)
    assert wire[:20] == struct.pack(">iiqi", HAState.HANDSHAKE, 24, 900, 3)
    assert MasterFrameDecoder(1 << 20).feed(wire) == frames


@pytest.mark.parametrize(("raw", "problem"), [
    (struct.pack(">iiq", 9, 0, 1), "unknown HA state 9"),
    (struct.pack(">iiq", HAState.HANDSHAKE, 0x10, 1), "unknown handshake flags"),
    (struct.pack(">iq", HAState.SUSPEND, 0), "does not send state SUSPEND"),
    (struct.pack(">iq", HAState.TRANSFER, -5), "negative ack offset"),
])
def test_bad_slave_frames(raw: bytes, problem: str) -> None:
    with pytest.raises(HAProtocolError, match=problem):
        SlaveFrameDecoder().feed(raw)


@pytest.mark.parametrize(("raw", "problem"), [
    (struct.pack(">iiqiqq", HAState.TRANSFER, 2 << 20, 0, 1, 0, 0), "limit"),
    (struct.pack(">iiqiqq", HAState.TRANSFER, 0, 100, 1, 200, 0), "bad transfer header"),
    (struct.pack(">iiqi", HAState.HANDSHAKE, 5, 0, 1), "bad epoch list size"),
    (struct.pack(">iiqi", HAState.HANDSHAKE, 24, 0, 1) + struct.pack(">iqiq", 2, 0, 1, 10),
     "not increasing"),
])
def test_bad_master_frames(raw: bytes, problem: str) -> None:
    with pytest.raises(HAProtocolError, match=problem):
        MasterFrameDecoder(1 << 20).feed(raw)
