"""A server connection's metered reader, without sockets: what it takes from the budget,
what it refuses, and when it says a frame began and bytes last arrived."""

from __future__ import annotations

import struct

import pytest

from mqcluster.wire.budget import ByteBudget
from mqcluster.wire.frame import FrameError, RemotingCommand, encode_frame
from mqcluster.wire.metered import FrameTracker, LimitExceeded, MeteredStreamReader


class FakeTransport:
    def __init__(self) -> None:
        self.aborted = False

    def abort(self) -> None:
        self.aborted = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class Clock:
    now = 50.0

    def __call__(self) -> float:
        return self.now


def reader(budget: ByteBudget, clock: Clock, max_frame: int = 1 << 20
           ) -> tuple[MeteredStreamReader, FakeTransport]:
    r = MeteredStreamReader(budget, max_frame, clock, limit=1 << 20)
    t = FakeTransport()
    r.set_transport(t)  # type: ignore[arg-type]
    return r, t


FRAME = encode_frame(RemotingCommand(1, 7, body=b"x" * 100))


async def test_whole_frames_take_nothing_and_a_partial_one_takes_what_arrived() -> None:
    budget, clock = ByteBudget(1000), Clock()
    r, t = reader(budget, clock)
    r.feed_data(FRAME * 3)
    assert budget.used == 0 and r.partial_since is None
    clock.now = 51.0
    r.feed_data(FRAME + FRAME[:10])
    assert budget.used == 10 and r.partial_since == 51.0 and r.last_fed == 51.0
    clock.now = 52.0
    r.feed_data(FRAME[10:20])  # the same frame: its start stays
    assert budget.used == 20 and r.partial_since == 51.0 and r.last_fed == 52.0
    clock.now = 53.0
    r.feed_data(FRAME[20:] + FRAME[:5])  # done, and the next one begins
    assert budget.used == 5 and r.partial_since == 53.0
    r.feed_data(FRAME[5:])
    assert budget.used == 0 and r.partial_since is None and not t.aborted
    assert len(await r.read(1 << 20)) == 6 * len(FRAME)  # every byte passed on


async def test_the_chunk_past_the_budget_is_dropped_and_its_connection_aborted() -> None:
    budget = ByteBudget(1000)
    budget.take(900)  # other connections' partial frames
    r, t = reader(budget, Clock())
    r.feed_data(FRAME)  # whole: served however full the budget is
    r.feed_data(struct.pack(">I", 5000) + bytes(96))
    assert budget.used == 1000
    r.feed_data(bytes(200))
    assert t.aborted and budget.used == 900  # its 100 given back
    r.feed_data(bytes(10))  # (anything after is ignored)
    with pytest.raises(LimitExceeded, match="would exceed 1000 bytes"):
        await r.read(1 << 20)


@pytest.mark.parametrize(("prefix", "error"), [
    (struct.pack(">I", 4097), "frame of 4097 bytes exceeds limit 4096"),
    (struct.pack(">I", 3), "frame length 3 is shorter"),
])
async def test_a_bad_length_prefix_is_refused_before_any_byte_is_held(
        prefix: bytes, error: str) -> None:
    budget = ByteBudget(1 << 20)
    r, t = reader(budget, Clock(), max_frame=4096)
    r.feed_data(prefix[:2])
    assert budget.used == 2
    r.feed_data(prefix[2:] + bytes(50))
    assert t.aborted and budget.used == 0
    with pytest.raises(FrameError, match=error):
        await r.read(1)


def test_the_tracker_splits_a_prefix_anywhere() -> None:
    t = FrameTracker(1 << 20)
    for i in range(len(FRAME)):
        assert t.feed(FRAME[i : i + 1]) == (i == 0 and len(FRAME) > 1)
    assert t.partial == 0
