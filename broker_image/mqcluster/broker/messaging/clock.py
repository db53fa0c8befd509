"""Time for the message service, in milliseconds since the epoch, injectable for tests."""

from __future__ import annotations

from typing import Protocol

from mqcluster.common.wallclock import wall_ms


class Clock(Protocol):
    def now_ms(self) -> int: ...


class SystemClock:
    def now_ms(self) -> int:
        return wall_ms()


class ManualClock:
    """A clock that only moves when told to."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> int:
        self._now += ms
        return self._now

    def set(self, now_ms: int) -> None:
        self._now = now_ms
