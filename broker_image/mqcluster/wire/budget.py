"""A byte budget shared by the connections of one server (bytes of partial frames)."""

from __future__ import annotations


class ByteBudget:
    """Counts bytes taken against a limit; ``take`` refuses what would exceed it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self, n: int) -> bool:
        """Take ``n`` bytes if they fit; False (and nothing taken) if they do not."""
        if self.used + n > self.limit:
            return False
        self.used += n
        return True

    def give(self, n: int) -> None:
        self.used -= n
        if self.used < 0:  # (a caller's bug; never let it grow the budget)
            raise AssertionError(f"budget gave back {-self.used} bytes more than taken")
