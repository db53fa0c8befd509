"""A number another process sets, at run time, by writing it into a file.

The fault seams (``mqcluster.store.fsync_seam``: a slow disk; ``mqcluster.common.wallclock``:
clock jumps) each read one: the chaos runner writes a new value and every process
that was started pointing at the file picks it up within ``refresh_s``. A missing,
empty or unreadable file reads as 0, so a seam left pointing at nothing is off.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path


class FileKnob:
    def __init__(self, path: str | Path, *, refresh_s: float = 0.1,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.path = Path(path)
        self.refresh_s = refresh_s
        self._monotonic = monotonic
        self._value = 0.0
        self._read_at = -float("inf")

    def value(self) -> float:
        """The file's number, read again at most every ``refresh_s`` (callers sit on hot
        paths: an fsync, every timestamp). Races between threads only re-read early."""
        now = self._monotonic()
        if now - self._read_at >= self.refresh_s:
            self._read_at = now
            try:
                self._value = float(self.path.read_text().strip() or 0)
            except (OSError, ValueError):
                self._value = 0.0
        return self._value
