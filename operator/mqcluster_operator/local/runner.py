"""Start, inspect and stop the processes of a local plan; state in a directory.

How a program is started here (``PROGRAMS``, ``write_config``, ``command``) is shared with
the test support's kubelet and node agent, which run pods' containers the same way."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from .plan import LocalProcess

STATE = "state.json"
BOOT_TIMEOUT = 60.0


@dataclass(frozen=True)
class Program:
    """What a pod's container command (``mqbroker``, ...) runs here, and the line it prints
    once it serves."""

    module: str
    boot_marker: str


PROGRAMS = {
    "mqnamesrv": Program("mqcluster.namesrv.main", "boot success"),
    "mqcontroller": Program("mqcluster.controller.main", " started on "),  # "<id> started on"
    "mqbroker": Program("mqcluster.broker.main", "boot success"),
    "mqproxy": Program("mqcluster.proxy.main", "boot success"),
}


def write_config(path: Path, props: Mapping[str, str]) -> None:
    """The properties file a program reads with ``-c``: one ``key=value`` a line."""
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))


def command(module: str, conf: Path) -> list[str]:
    """This interpreter running ``module`` on the properties file ``conf``."""
    return [sys.executable, "-m", module, "-c", str(conf)]


@dataclass
class Running:
    name: str
    kind: str
    group: str
    ip: str
    pid: int
    log: str
    props: dict[str, str]

    @property
    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except OSError:
            return False
        with contextlib.suppress(OSError):  # a zombie child of this process is not alive
            stat = Path(f"/proc/{self.pid}/stat").read_text()
            return stat.rsplit(")", 1)[1].split()[0] != "Z"
        return True

    @property
    def addr(self) -> str:
        return f"{self.ip}:{self.props.get('listenPort', '')}"

    @property
    def grpc(self) -> str:
        return f"{self.ip}:{self.props.get('grpcServerPort', '8081')}"


class BootError(RuntimeError):
    pass


class LocalCluster:
    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.processes: list[Running] = []
        if (state_dir / STATE).exists():
            raw = json.loads((state_dir / STATE).read_text())
            self.processes = [Running(**p) for p in raw]

    def save(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / STATE).write_text(json.dumps([asdict(p) for p in self.processes],
                                                       indent=1))

    def start(self, proc: LocalProcess, progress: Callable[[str], None]) -> Running:
        conf_dir = self.state_dir / "conf"
        log_dir = self.state_dir / "logs"
        conf_dir.mkdir(parents=True, exist_ok=True)
        log_dir.mkdir(parents=True, exist_ok=True)
        conf = conf_dir / f"{proc.name}.conf"
        write_config(conf, proc.props)
        log = log_dir / f"{proc.name}.log"
        with log.open("ab") as out:
            child = subprocess.Popen(
                command(proc.module, conf),
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
        running = Running(proc.name, proc.kind, proc.group, proc.ip, child.pid, str(log),
                          proc.props)
        self.processes.append(running)
        self.save()
        progress(f"  started {proc.kind} {proc.name} on {proc.ip} (pid {child.pid})")
        return running

    def wait_booted(self, running: Running, marker: str, timeout: float = BOOT_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        log = Path(running.log)
        while time.monotonic() < deadline:
            if marker in log.read_text(errors="replace"):
                return
            if not running.alive:
                break
            time.sleep(0.05)  # another process's log: no event to await
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
        why = "exited" if not running.alive else "timeout"
        raise BootError(f"{running.name} did not boot ({why}):\n{tail}")

    def up(self, plan: list[LocalProcess], progress: Callable[[str], None]) -> None:
        """Controllers (or name servers) first, then every broker, then the proxies; waits
        for each to boot."""
        for stage in (("namesrv", "controller"), ("broker",), ("proxy",)):
            started = [(self.start(p, progress), p.boot_marker) for p in plan
                       if p.kind in stage]
            for running, marker in started:
                self.wait_booted(running, marker)
            if started:
                progress(f"  {len(started)} {'/'.join(stage)} process(es) up")

    def by_name(self, name: str) -> Running:
        return next(p for p in self.processes if p.name == name)

    def kill(self, name: str) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.by_name(name).pid, signal.SIGKILL)

    def down(self, timeout: float = 15.0) -> list[str]:
        """SIGTERM every process, SIGKILL what is still there after ``timeout``."""
        for p in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(p.alive for p in self.processes):
            _reap()
            time.sleep(0.05)
        killed = []
        for p in self.processes:
            if p.alive:
                killed.append(p.name)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGKILL)
        _reap()
        self.processes = []
        shutil.rmtree(self.state_dir, ignore_errors=True)  # configs, logs and data
        return killed


def _reap() -> None:
    """Collect exited children of this process (``up`` in the same process, as the demo)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
