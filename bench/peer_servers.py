"""Peers for the comparison bench, as 3-node clusters on loopback: NATS JetStream and
RabbitMQ (quorum queues), from Debian's packages (installed on first use)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.procs import free_addr

APT_PACKAGES = {"nats": "nats-server", "rabbitmq": "rabbitmq-server"}


class PeerUnavailable(RuntimeError):
    """The peer cannot run here; the message says why (printed in the table)."""


def ensure_installed(peer: str, binary: str) -> str:
    path = shutil.which(binary) or (f"/usr/sbin/{binary}" if os.path.exists(
        f"/usr/sbin/{binary}") else None)
    if path:
        return path
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise PeerUnavailable(f"{binary} is not installed and apt-get is not usable here")
    res = subprocess.run(["apt-get", "install", "-y", "-q", APT_PACKAGES[peer]],
                         capture_output=True, text=True, timeout=900,
                         env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    if res.returncode != 0:
        raise PeerUnavailable(f"apt-get install {APT_PACKAGES[peer]} failed: "
                              f"{res.stderr.strip()[-300:]}")
    # Debian's postinst may start a system-wide instance; the bench runs its own.
    subprocess.run(["pkill", "-f", "beam.smp"], capture_output=True)
    return shutil.which(binary) or f"/usr/sbin/{binary}"


@dataclass
class NatsCluster:
    root: Path
    size: int = 3
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    client_addrs: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    def config(self, i: int, client: str, route: str, routes: list[str], http: str) -> str:
        host, port = client.rsplit(":", 1)
        rhost, rport = route.rsplit(":", 1)
        others = ", ".join(f'"nats-route://{r}"' for r in routes if r != route)
        return (f'server_name: "n{i}"\nlisten: "{host}:{port}"\nhttp: "{http}"\n'
                f'jetstream {{ store_dir: "{self.root / f"n{i}"}" }}\n'
                f'cluster {{ name: "bench", listen: "{rhost}:{rport}", routes: [{others}] }}\n')

    def start(self) -> None:
        binary = ensure_installed("nats", "nats-server")
        clients = [free_addr() for _ in range(self.size)]
        routes = [free_addr(c.rsplit(":", 1)[0]) for c in clients]
        https = [free_addr(c.rsplit(":", 1)[0]) for c in clients]
        self.root.mkdir(parents=True, exist_ok=True)
        for i in range(self.size):
            conf = self.root / f"n{i}.conf"
            conf.write_text(self.config(i, clients[i], routes[i], routes, https[i]))
            log = (self.root / f"n{i}.log").open("ab")
            self.procs.append(subprocess.Popen([binary, "-c", str(conf)], stdout=log,
                                               stderr=subprocess.STDOUT))
            self.names.append(f"n{i}")
        self.client_addrs = clients

    def pid_of(self, name: str) -> int:
        return self.procs[self.names.index(name)].pid

    def kill(self, name: str) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid_of(name), signal.SIGKILL)
        self.procs[self.names.index(name)].wait()

    def restart(self, name: str) -> None:
        i = self.names.index(name)
        log = (self.root / f"n{i}.log").open("ab")
        conf = self.root / f"n{i}.conf"
        self.procs[i] = subprocess.Popen([shutil.which("nats-server") or
                                          "/usr/sbin/nats-server", "-c", str(conf)],
                                         stdout=log, stderr=subprocess.STDOUT)

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()


@dataclass
class RabbitCluster:
    root: Path
    size: int = 3
    nodes: list[str] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def env(self, i: int) -> dict[str, str]:
        return {**os.environ, "HOME": str(self.root), "RABBITMQ_NODENAME": self.nodes[i],
                "RABBITMQ_NODE_PORT": str(self.ports[i]),
                "RABBITMQ_DIST_PORT": str(self.ports[i] + 20000),
                "RABBITMQ_MNESIA_BASE": str(self.root / f"r{i}" / "mnesia"),
                "RABBITMQ_LOG_BASE": str(self.root / f"r{i}" / "log"),
                "RABBITMQ_CONFIG_FILE": str(self.root / f"r{i}" / "rabbitmq"),
                "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.root / f"r{i}" / "plugins")}

    def ctl(self, i: int, *args: str, timeout: float = 120) -> str:
        res = subprocess.run([_rabbit_bin("rabbitmqctl"), "-n", self.nodes[i], *args],
                             env=self.env(i),
                             capture_output=True, text=True, timeout=timeout)
        if res.returncode != 0:
            raise PeerUnavailable(f"rabbitmqctl {' '.join(args)} on {self.nodes[i]}: "
                                  f"{(res.stderr or res.stdout).strip()[-300:]}")
        return res.stdout

    def start(self) -> None:
        ensure_installed("rabbitmq", "rabbitmq-server")
        binary = _rabbit_bin("rabbitmq-server")
        self.root.mkdir(parents=True, exist_ok=True)
        cookie = self.root / ".erlang.cookie"
        cookie.write_text("MQCLUSTERBENCHCOOKIE")
        cookie.chmod(0o400)
        base = 30000 + os.getpid() % 2000
        self.ports = [base + i for i in range(self.size)]
        self.nodes = [f"bench{i}@localhost" for i in range(self.size)]
        for i in range(self.size):
            (self.root / f"r{i}").mkdir(exist_ok=True)
            (self.root / f"r{i}" / "rabbitmq.conf").write_text(
                f"listeners.tcp.default = 127.0.0.1:{self.ports[i]}\nloopback_users = none\n")
            (self.root / f"r{i}" / "plugins").write_text("[].\n")
            self.start_node(i, binary)
        for i in range(self.size):
            self.wait_booted(i)
        for i in range(1, self.size):
            self.ctl(i, "stop_app")
            self.ctl(i, "join_cluster", self.nodes[0])
            self.ctl(i, "start_app")

    def wait_booted(self, i: int, timeout: float = 180.0) -> None:
        out = self.root / f"r{i}.out"
        deadline = time.monotonic() + timeout
        while "Starting broker... completed" not in out.read_text(errors="replace"):
            if time.monotonic() > deadline or self.procs[i].poll() is not None:
                tail = out.read_text(errors="replace")[-300:]
                raise PeerUnavailable(f"RabbitMQ node {self.nodes[i]} did not start: {tail}")
            time.sleep(0.2)  # another process's log: no event to await

    def start_node(self, i: int, binary: str | None = None) -> None:
        binary = binary or _rabbit_bin("rabbitmq-server")
        log = (self.root / f"r{i}.out").open("ab")
        proc = subprocess.Popen([binary], env=self.env(i), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        if i < len(self.procs):
            self.procs[i] = proc
        else:
            self.procs.append(proc)

    def beam_pid(self, i: int) -> int | None:
        """The Erlang VM of node ``i`` (rabbitmq-server is a script around it), found by
        the node name in its environment."""
        res = subprocess.run(["pgrep", "beam.smp"], capture_output=True, text=True)
        want = f"RABBITMQ_NODENAME={self.nodes[i]}".encode()
        for pid in (int(p) for p in res.stdout.split()):
            with contextlib.suppress(OSError):
                if want in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                    return pid
        return None

    def pids(self) -> list[int]:
        return [p for p in (self.beam_pid(i) for i in range(self.size)) if p]

    def kill(self, i: int) -> None:
        pid = self.beam_pid(i)
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        for i in range(self.size):
            self.kill(i)
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
        subprocess.run(["pkill", "-f", "epmd -daemon"], capture_output=True)


def _rabbit_bin(name: str) -> str:
    """The scripts themselves: Debian's /usr/sbin wrappers switch to the rabbitmq user and
    drop the environment that gives each node its own name, ports and directories."""
    found = sorted(Path("/usr/lib/rabbitmq/lib").glob(f"rabbitmq_server-*/sbin/{name}"))
    return str(found[-1]) if found else name


async def wait_port(addr: str, timeout: float = 60.0) -> None:
    host, port = addr.rsplit(":", 1)
    deadline = time.monotonic() + timeout
    while True:
        try:
            _, w = await asyncio.open_connection(host, int(port))
            w.close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise PeerUnavailable(f"nothing listens on {addr} after {timeout:.0f} s") from None
            await asyncio.sleep(0.1)
