"""Frames written in one turn of the loop leave in one send, in order."""

from __future__ import annotations

import asyncio

from mqcluster.wire.coalesce import CoalescingWriter


class RecordingTransportWriter:
    """The part of StreamWriter that CoalescingWriter uses."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    async def drain(self) -> None:
        return None


async def test_writes_of_one_turn_leave_together_in_order() -> None:
    inner = RecordingTransportWriter()
    w = CoalescingWriter(inner)  # type: ignore[arg-type]
    w.write(b"a")
    w.write(b"bc")
    w.write(b"d")
    assert inner.writes == []
    await asyncio.sleep(0)
    assert inner.writes == [b"abcd"]
    w.write(b"e")
    await asyncio.sleep(0)
    assert inner.writes == [b"abcd", b"e"]


async def test_a_large_burst_is_handed_over_at_once() -> None:
    inner = RecordingTransportWriter()
    w = CoalescingWriter(inner, max_pending=10)  # type: ignore[arg-type]
    w.write(b"12345")
    w.write(b"678901")
    assert inner.writes == [b"12345678901"]
    await asyncio.sleep(0)
    assert inner.writes == [b"12345678901"]


async def test_a_burst_of_many_frames_leaves_every_max_frames() -> None:
    # The peer gets the first answers of a long turn while the rest are being made.
    inner = RecordingTransportWriter()
    w = CoalescingWriter(inner, max_frames=3)  # type: ignore[arg-type]
    for ch in b"abcdefg":
        w.write(bytes([ch]))
    assert inner.writes == [b"abc", b"def"]
    await asyncio.sleep(0)
    assert inner.writes == [b"abc", b"def", b"g"]


async def test_close_sends_what_is_pending_and_nothing_goes_to_a_closing_transport() -> None:
    inner = RecordingTransportWriter()
    w = CoalescingWriter(inner)  # type: ignore[arg-type]
    w.write(b"last")
    w.close()
    assert inner.writes == [b"last"] and inner.closing
    w.write(b"late")
    await asyncio.sleep(0)
    assert inner.writes == [b"last"]
