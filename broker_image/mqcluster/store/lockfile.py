"""One process per store: an exclusive ``flock`` on ``<root>/lock``, released by death too."""

from __future__ import annotations

import fcntl
import os


class StoreLockedError(RuntimeError):
    """Another process has this store open."""


class StoreLock:
    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = -1

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StoreLockedError(f"{self.path} is held by another process") from None
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
