"""One ``chaos.lazyfs`` mount run from here: mounted, told to drop what was not fsynced,
unmounted and mounted again (the power-loss fault's steps), always cleaned up."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

MOUNT_TIMEOUT = 30.0


def fuse_unavailable() -> str | None:
    """Why FUSE mounts cannot be made here, or None when they can."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not readable and writable (the chaos suite runs as root)"
    if not (shutil.which("fusermount3") or shutil.which("fusermount")):
        return "fusermount3 is not installed (Debian package fuse3)"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as exc:  # OSError: no libfuse shared library
        return f"the FUSE binding cannot load: {exc}"
    return None


def fusermount() -> str:
    return shutil.which("fusermount3") or shutil.which("fusermount") or "fusermount3"


class LazyMount:
    def __init__(self, mountpoint: Path, backing: Path, log: Path) -> None:
        self.mountpoint = mountpoint
        self.backing = backing
        self.log = log
        self.report = log.with_suffix(".drops.jsonl")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def mounted(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def mount_sync(self) -> None:
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        self.backing.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "chaos.lazyfs", str(self.mountpoint),
                 str(self.backing), "--report", str(self.report)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while not os.path.ismount(self.mountpoint):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self._kill()
                raise RuntimeError(f"lazyfs did not mount {self.mountpoint}:\n"
                                   f"{self.log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.02)

    def drop_sync(self) -> dict[str, Any]:
        """Lose every unsynced write now; what the filesystem says it dropped."""
        before = self._drops()
        with (self.mountpoint / ".lazyfs").open("w") as f:
            f.write("drop\n")
        after = self._drops()
        if len(after) <= len(before):
            raise RuntimeError(f"lazyfs on {self.mountpoint} did not report the drop")
        return after[-1]

    def _drops(self) -> list[dict[str, Any]]:
        with contextlib.suppress(FileNotFoundError):
            return [json.loads(line) for line in self.report.read_text().splitlines()]
        return []

    def unmount_sync(self, timeout: float = 5.0) -> None:
        """Unmount (lazily when busy) and wait for the process; it drops on the way.
        A process started in a namespace host (``ip netns exec``) after the mount holds
        a copy of it that an unmount here may not reach: the process is killed after
        ``timeout``, which ends every copy at once."""
        if self.proc is None:
            return
        if self.mounted:
            done = subprocess.run([fusermount(), "-u", str(self.mountpoint)],
                                  capture_output=True)
            if done.returncode != 0:
                subprocess.run([fusermount(), "-u", "-z", str(self.mountpoint)],
                               capture_output=True)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout)
        self._kill()

    def power_off_sync(self) -> dict[str, Any]:
        """Drop what was not fsynced, then end the filesystem's process (and with it
        the kernel's connection and caches, in every mount namespace); what was lost.
        ``mount_sync`` serves the synced state again."""
        lost = self.drop_sync()
        self._kill()
        return lost

    def _kill(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.proc = None
        # A killed lazyfs leaves its mount behind, disconnected (where even a stat
        # fails): detach it whatever it looks like.
        subprocess.run([fusermount(), "-u", "-z", str(self.mountpoint)], capture_output=True)

    async def mount(self) -> None:
        await asyncio.to_thread(self.mount_sync)

    async def drop(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.drop_sync)

    async def unmount(self) -> None:
        await asyncio.to_thread(self.unmount_sync)

    async def power_off(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.power_off_sync)
