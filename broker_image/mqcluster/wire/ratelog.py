"""Log lines an attacker can trigger at will, at most one per kind per interval.

The first event of a kind is logged at once; later ones within ``interval`` seconds are
counted and the count rides on the next line logged for that kind. A kind may be a
remote host; past ``max_kinds`` of them everything is forgotten (memory stays bounded
whatever the number of hosts).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class RateLimitedLog:
    def __init__(self, logger: logging.Logger, interval: float = 10.0,
                 clock: Callable[[], float] = time.monotonic, max_kinds: int = 1024) -> None:
        self.logger = logger
        self.interval = interval
        self.clock = clock
        self.max_kinds = max_kinds
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def warning(self, kind: str, msg: str, *args: object) -> bool:
        return self.log(logging.WARNING, kind, msg, *args)

    def log(self, level: int, kind: str, msg: str, *args: object) -> bool:
        """Log ``msg % args`` unless a ``kind`` line went out less than ``interval`` ago;
        True if it was logged."""
        now = self.clock()
        last = self._last.get(kind)
        if last is not None and now - last < self.interval:
            self._suppressed[kind] = self._suppressed.get(kind, 0) + 1
            return False
        if last is None and len(self._last) >= self.max_kinds:
            self._last.clear()
            self._suppressed.clear()
        self._last[kind] = now
        skipped = self._suppressed.pop(kind, 0)
        if skipped:
            self.logger.log(level, msg + " (and %d more like it since the last such line)",
                            *args, skipped)
        else:
            self.logger.log(level, msg, *args)
        return True
