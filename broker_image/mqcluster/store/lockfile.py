"""One store per path: every directory a store writes is ``flock``ed, released by death too.

The directories themselves are locked (not a file inside them), so two stores collide
whatever role each gives a directory: one's ``storePathCommitLog`` naming the other's
root, or two roots sharing one commitlog directory. A file that is replaced by rename
(the epoch file) is locked through ``<file>.lock`` beside it. ``<root>/lock`` keeps
RocketMQ's name and says who holds the store.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Sequence

from mqcluster.store.errors import StoreLockedError

__all__ = ["StoreLock", "StoreLockedError", "lock_holder"]


def lock_holder(fd: int) -> str | None:
    """Who holds a ``flock`` on the file open as ``fd``: "pid N (command line)", from
    ``/proc/locks``; None where that is not known."""
    st = os.fstat(fd)
    want = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) < 6 or fields[1] != "FLOCK":
            continue
        try:
            major, minor, ino = fields[5].split(":")
            where = (int(major, 16), int(minor, 16), int(ino))
            pid = int(fields[4])
        except ValueError:
            continue
        if where == want and pid > 0:
            return f"pid {pid}{_command(pid)}"
    return None


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return ""
    text = " ".join(a.decode(errors="replace") for a in argv if a)
    return f" ({text[:200]})" if text else ""


class StoreLock:
    """``dirs``: directories to lock (created when missing); ``files``: files whose
    ``<file>.lock`` to lock; ``owner_file``: where to say who holds the store."""

    def __init__(self, dirs: Sequence[str], files: Sequence[str] = (),
                 owner_file: str | None = None) -> None:
        self.dirs = list(dirs)
        self.files = list(files)
        self.owner_file = owner_file
        self._fds: list[int] = []

    def acquire(self) -> None:
        seen: set[tuple[int, int]] = set()
        try:
            for d in self.dirs:
                os.makedirs(d, exist_ok=True)
                self._lock(os.open(d, os.O_RDONLY | os.O_DIRECTORY), d, seen)
            for path in self.files:
                directory = os.path.dirname(os.path.abspath(path))
                os.makedirs(directory, exist_ok=True)
                lock = f"{path}.lock"
                self._lock(os.open(lock, os.O_RDWR | os.O_CREAT, 0o644), lock, seen)
            if self.owner_file is not None:
                self._write_owner(self.owner_file)
        except BaseException:
            self.release()
            raise

    def _lock(self, fd: int, path: str, seen: set[tuple[int, int]]) -> None:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) in seen:  # one directory in two roles: locked already
            os.close(fd)
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = lock_holder(fd)
            os.close(fd)
            raise StoreLockedError(
                f"{path} is in use by another store"
                + (f", held by {holder}" if holder else "")
                + ": two stores must not share a directory") from None
        seen.add((st.st_dev, st.st_ino))
        self._fds.append(fd)

    @staticmethod
    def _write_owner(path: str) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, f"pid {os.getpid()}\n".encode())
        finally:
            os.close(fd)

    def release(self) -> None:
        fds, self._fds = self._fds, []
        if fds and self.owner_file is not None:  # nobody holds it any more
            with contextlib.suppress(OSError), open(self.owner_file, "wb"):
                pass
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
