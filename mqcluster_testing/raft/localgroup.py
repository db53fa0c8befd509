"""A Raft group of local ``mqraft`` processes on 127.0.0.x, for tests and benches.

Each member gets its own loopback address (127.0.0.x, random x) and a port the
kernel reports free, a store directory and a log file under ``root``. ``kill``
is SIGKILL; ``close`` kills whatever is still running. ``spawn`` can be
replaced (tests pass one that registers processes for guaranteed cleanup).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from mqcluster_testing.procs import free_addr

Spawn = Callable[[Sequence[str], str, Path], "subprocess.Popen[bytes]"]


def default_spawn(argv: Sequence[str], name: str, log_path: Path) -> subprocess.Popen[bytes]:
    with open(log_path, "ab") as out:
        return subprocess.Popen(
            list(argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )


class LocalGroup:
    def __init__(
        self,
        root: Path,
        size: int = 3,
        *,
        extra_args: Sequence[str] = (),
        spawn: Spawn = default_spawn,
    ) -> None:
        self.root = root
        self.extra_args = list(extra_args)
        self.spawn = spawn
        self.peers = {f"n{i}": free_addr() for i in range(size)}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def peers_arg(self) -> str:
        return ";".join(f"{n}-{a}" for n, a in self.peers.items())

    def log_path(self, node_id: str) -> Path:
        return self.root / f"{node_id}.log"

    def start(self, node_id: str) -> subprocess.Popen[bytes]:
        argv = [
            sys.executable, "-m", "mqcluster.raft.main",
            "--id", node_id, "--peers", self.peers_arg,
            "--store", str(self.root / node_id), *self.extra_args,
        ]
        proc = self.spawn(argv, node_id, self.log_path(node_id))
        self.procs[node_id] = proc
        return proc

    def start_all(self) -> None:
        for node_id in self.peers:
            self.start(node_id)

    def kill(self, node_id: str) -> None:
        proc = self.procs.pop(node_id, None)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        if proc is not None:
            proc.wait()

    def close(self) -> None:
        for node_id in list(self.procs):
            self.kill(node_id)

    def __enter__(self) -> LocalGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
