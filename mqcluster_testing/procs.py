"""Helpers for multi-process tests: free loopback addresses and child processes that never leak.

Usage in a test module::

    # ``procs`` is a fixture: importing it registers it
    from mqcluster_testing.procs import Procs, free_addr, procs  # noqa: F401

    def test_something(procs: Procs) -> None:
        addr = free_addr()                    # "127.0.0.N:PORT", free right now
        p = procs.spawn(["mqraft", ...], name="n0")
        ...
        procs.kill(p)                         # SIGKILL + wait

- ``free_addr(host=None)`` picks a random 127.0.0.x (x in 2..250; Linux routes the
  whole 127/8 to loopback) and a port the kernel reports free on it.
- The ``procs`` fixture yields a ``Procs`` that SIGKILLs and reaps every process it
  started when the test ends, pass or fail; each child's output goes to a log file
  under the test's ``tmp_path``, and ``procs.output(p)`` / ``procs.output_of(name)`` read it back.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

_used: set[str] = set()


def free_addr(host: str | None = None) -> str:
    """A "host:port" on loopback that nothing listens on right now (never handed out twice)."""
    for _ in range(100):
        h = host or f"127.0.0.{random.randint(2, 250)}"
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((h, 0))
            except OSError:
                continue
            addr = f"{h}:{s.getsockname()[1]}"
        if addr not in _used:
            _used.add(addr)
            return addr
    raise RuntimeError("no free loopback address found")


class Procs:
    """Starts child processes and guarantees they are killed and reaped."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[subprocess.Popen[bytes]] = []
        self._logs: dict[int, Path] = {}

    def spawn(
        self, argv: Sequence[str], *, name: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        log_path = self.log_dir / f"{name}.{len(self.started)}.log"
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        with open(log_path, "wb") as out:
            p = subprocess.Popen(
                list(argv), stdout=out, stderr=subprocess.STDOUT, env=full_env,
                stdin=subprocess.DEVNULL,
            )
        self.started.append(p)
        self._logs[p.pid] = log_path
        return p

    def python(self, *args: str, name: str) -> subprocess.Popen[bytes]:
        """Spawn ``sys.executable *args`` (e.g. ``-m mqcluster.raft.main ...``)."""
        return self.spawn([sys.executable, *args], name=name)

    def output_of(self, name: str) -> str:
        """Output of every process spawned under ``name``, oldest first."""
        logs = sorted(self.log_dir.glob(f"{name}.*.log"), key=lambda q: int(q.name.split(".")[1]))
        return "".join(q.read_text(errors="replace") for q in logs)

    def output(self, p: subprocess.Popen[bytes]) -> str:
        path = self._logs.get(p.pid)
        return path.read_text(errors="replace") if path and path.exists() else ""

    @staticmethod
    def kill(p: subprocess.Popen[bytes]) -> None:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGKILL)
        p.wait()

    def kill_all(self) -> None:
        for p in self.started:
            self.kill(p)


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    log_dir = tmp_path / "proc-logs"
    log_dir.mkdir()
    group = Procs(log_dir)
    try:
        yield group
    finally:
        group.kill_all()
