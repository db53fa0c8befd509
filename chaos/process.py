"""One program on a namespace host: started until it prints its boot line, then
SIGKILLed, SIGSTOPped/SIGCONTed, terminated and restarted with the same command."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

from chaos.netns import Host

BOOT_TIMEOUT = 60.0


class HostProcess:
    def __init__(self, name: str, host: Host, argv: list[str], log_path: Path,
                 boot_marker: str, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.host = host
        self.argv = argv
        self.log_path = log_path
        self.boot_marker = boot_marker
        self.env = env or {}
        self.proc: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task[None] | None = None
        self.stopped = False
        self.starts = 0

    @classmethod
    def python(cls, name: str, host: Host, args: list[str], log_path: Path,
               boot_marker: str, env: dict[str, str] | None = None) -> HostProcess:
        return cls(name, host, [sys.executable, *args], log_path, boot_marker, env)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def start(self) -> None:
        self.starts += 1
        with self.log_path.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                *self.host.command(self.argv, {"PYTHONUNBUFFERED": "1", **self.env}),
                stdout=asyncio.subprocess.PIPE, stderr=log, stdin=asyncio.subprocess.DEVNULL)
        self.stopped = False
        assert self.proc.stdout is not None
        try:
            async with asyncio.timeout(BOOT_TIMEOUT):
                while True:
                    line = await self.proc.stdout.readline()
                    if not line:
                        raise RuntimeError(f"{self.name} exited before booting:\n"
                                           f"{self.log_tail()}")
                    self._log(line)
                    if self.boot_marker.encode() in line:
                        break
        except BaseException:
            await self.kill()
            raise
        self._drain = asyncio.create_task(self._drain_stdout())

    def _log(self, line: bytes) -> None:
        with self.log_path.open("ab") as log:
            log.write(line)

    async def _drain_stdout(self) -> None:
        """Keep reading stdout so a chatty program never blocks on a full pipe."""
        assert self.proc is not None and self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            self._log(line)

    def signal(self, sig: signal.Signals) -> None:
        if self.alive:
            assert self.proc is not None
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, sig)

    def hang(self) -> None:
        self.signal(signal.SIGSTOP)
        self.stopped = True

    def wake(self) -> None:
        self.signal(signal.SIGCONT)
        self.stopped = False

    async def kill(self) -> None:
        """SIGKILL and reap."""
        if self.proc is not None and self.proc.returncode is None:
            self.signal(signal.SIGKILL)
            await self.proc.wait()
        await self._finish_drain()

    async def terminate(self, timeout: float = 30.0) -> None:
        """SIGTERM and wait for a clean exit (SIGKILL after ``timeout``)."""
        if not self.alive:
            return
        assert self.proc is not None
        if self.stopped:
            self.wake()
        self.signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            await self.kill()
        await self._finish_drain()

    async def _finish_drain(self) -> None:
        if self._drain is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._drain, 5)
            self._drain = None

    def log_tail(self, n: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        return ""
