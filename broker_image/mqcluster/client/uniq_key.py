"""Producer-side unique message keys (``UNIQ_KEY``), shaped like RocketMQ's client ids.

A key is 32 hex digits: a per-generator prefix (random salt, process id, random
salt) then the milliseconds since the generator started and a 16-bit counter that
never resets, so keys repeat only if one generator makes 65,536 in one millisecond.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable


class UniqKeyGenerator:
    def __init__(
        self,
        *,
        rng: random.Random | None = None,
        pid: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        rng = rng or random.Random()
        pid = os.getpid() if pid is None else pid
        salt_a, salt_b = rng.getrandbits(32), rng.getrandbits(32)
        self._prefix = f"{salt_a:08X}{pid & 0xFFFF:04X}{salt_b:08X}"
        self._clock = clock
        self._start_ms = int(clock() * 1000)
        self._counter = 0

    def next_keys(self, n: int) -> list[str]:
        """``n`` new keys (one clock reading for all of them)."""
        head = self._head()
        first = self._counter
        self._counter = (first + n) & 0xFFFF
        return [f"{head}{(first + i) & 0xFFFF:04X}" for i in range(n)]

    def next_key(self) -> str:
        """One new key (``next_keys(1)`` without the list: a key per send is the common case)."""
        first = self._counter
        self._counter = (first + 1) & 0xFFFF
        return f"{self._head()}{first:04X}"

    def _head(self) -> str:
        """The prefix and the milliseconds since the generator started."""
        elapsed = (int(self._clock() * 1000) - self._start_ms) & 0xFFFFFFFF
        return f"{self._prefix}{elapsed:08X}"
