"""How long the election followers wait after one of their own writes failed.

The followers write outside kopf's handlers (labels, status, Events), so kopf's retry
and backoff do not cover them. A throttled write (429) waits what the API server's
``Retry-After`` says; a conflict or a server failure backs off exponentially with
jitter, up to a cap; a write refused for good (another 4xx) is reported once, as a
Warning Event, and retried only at the cap, never in a hot loop. Pure: the caller
sleeps.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from .k8s import ApiError

REASON_REFUSED = "FollowerWriteRefused"


@dataclass
class WriteBackoff:
    base: float = 0.5
    cap: float = 30.0
    rng: random.Random = field(default_factory=random.Random)
    failures: int = 0
    reported: str | None = None
    """The last refusal reported (the same one is not reported again)."""

    def succeeded(self) -> None:
        self.failures = 0
        self.reported = None

    def delay(self, exc: BaseException) -> float:
        """Seconds to wait before the next round after ``exc``."""
        self.failures += 1
        if isinstance(exc, ApiError):
            if exc.retry_after is not None:
                return min(self.cap, max(exc.retry_after, 0.0))
            if refused(exc):
                return self.cap
        backoff = min(self.cap, self.base * 2.0 ** (self.failures - 1))
        return float(backoff * (0.5 + self.rng.random() / 2))

    def report(self, exc: BaseException) -> str | None:
        """The message of a refusal to report now (None: nothing new to report)."""
        if not isinstance(exc, ApiError) or not refused(exc):
            return None
        message = str(exc)
        if message == self.reported:
            return None
        self.reported = message
        return message


def refused(exc: ApiError) -> bool:
    """A client error that retrying the same write cannot fix."""
    return 400 <= exc.status < 500 and not exc.transient and exc.status != 404
