"""3-node RabbitMQ and NATS JetStream clusters on loopback, for the peers bench.

Config rendering is pure (``rabbit_env``, ``rabbit_conf``, ``nats_conf``); the
``LocalCluster`` classes start the Debian packages' binaries as plain processes with
their own data dirs (no systemd), SIGKILL and restart single nodes, and clean up.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

RABBIT_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"  # not the sbin wrapper: no su
RABBITMQCTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"
NATS_SERVER = "nats-server"
PACKAGES = {"rabbitmq": "rabbitmq-server", "nats": "nats-server"}
SYSTEMD_UNITS = {"rabbitmq": "rabbitmq-server", "nats": "nats-server"}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class RabbitNode:
    name: str  # Erlang node name, rabbit-bench-N@localhost
    amqp_port: int
    dist_port: int
    root: Path


def rabbit_nodes(root: Path, amqp_ports: Sequence[int], dist_ports: Sequence[int],
                 tag: str = "bench") -> list[RabbitNode]:
    """Nodes ``rabbit-<tag>-N@localhost``: a tag of its own per run keeps them apart from
    any other RabbitMQ node on this host."""
    if len(amqp_ports) != len(dist_ports):
        raise ValueError(f"need one dist port per AMQP port, got {len(amqp_ports)} and "
                         f"{len(dist_ports)}")
    return [RabbitNode(f"rabbit-{tag}-{i + 1}@localhost", a, d, root / f"rabbit{i + 1}")
            for i, (a, d) in enumerate(zip(amqp_ports, dist_ports, strict=True))]


def rabbit_conf(node: RabbitNode, all_nodes: Sequence[RabbitNode]) -> str:
    """rabbitmq.conf: AMQP on loopback, classic-config peer discovery of all nodes."""
    lines = [
        f"listeners.tcp.default = 127.0.0.1:{node.amqp_port}",
        "cluster_formation.peer_discovery_backend = classic_config",
        *(f"cluster_formation.classic_config.nodes.{i + 1} = {n.name}"
          for i, n in enumerate(all_nodes)),
        "log.console = false",
        "log.file.level = warning",
    ]
    return "\n".join(lines) + "\n"


def rabbit_env(node: RabbitNode, home: Path, epmd_port: int) -> dict[str, str]:
    """Environment for ``rabbitmq-server`` and ``rabbitmqctl`` of one node: every path
    under the node's own dir, a private epmd and a shared cookie (``home``)."""
    return {
        "HOME": str(home),
        "ERL_EPMD_PORT": str(epmd_port),
        "RABBITMQ_NODENAME": node.name,
        "RABBITMQ_DIST_PORT": str(node.dist_port),
        "RABBITMQ_CONFIG_FILE": str(node.root / "rabbitmq.conf"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(node.root / "enabled_plugins"),
        "RABBITMQ_MNESIA_BASE": str(node.root / "mnesia"),
        "RABBITMQ_LOG_BASE": str(node.root / "log"),
        "RABBITMQ_PID_FILE": str(node.root / "rabbit.pid"),
    }


@dataclass(frozen=True)
class NatsNode:
    name: str
    port: int
    cluster_port: int
    root: Path


def nats_nodes(root: Path, ports: Sequence[int], cluster_ports: Sequence[int]) -> list[NatsNode]:
    if len(ports) != len(cluster_ports):
        raise ValueError(f"need one cluster port per client port, got {len(ports)} and "
                         f"{len(cluster_ports)}")
    return [NatsNode(f"n{i + 1}", p, c, root / f"nats{i + 1}")
            for i, (p, c) in enumerate(zip(ports, cluster_ports, strict=True))]


def nats_conf(node: NatsNode, all_nodes: Sequence[NatsNode]) -> str:
    """nats-server config: JetStream with its own store dir, routes to every node."""
    routes = ", ".join(f"nats-route://127.0.0.1:{n.cluster_port}" for n in all_nodes)
    return (
        f"server_name: {node.name}\n"
        f"listen: 127.0.0.1:{node.port}\n"
        f'jetstream {{ store_dir: "{node.root / "js"}", max_mem: 64MB, max_file: 2GB }}\n'
        f"cluster {{ name: bench, listen: 127.0.0.1:{node.cluster_port}, "
        f"routes: [{routes}] }}\n"
    )


def ensure_installed(kind: str) -> None:
    """apt-get install the Debian package when its binary is missing; stop the
    service the package starts (the bench runs its own nodes)."""
    binary = RABBIT_SERVER if kind == "rabbitmq" else shutil.which(NATS_SERVER)
    if not binary or not Path(binary).exists():
        subprocess.run(["apt-get", "install", "-y", PACKAGES[kind]], check=True,
                       capture_output=True, text=True,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        if shutil.which("systemctl"):
            subprocess.run(["systemctl", "stop", SYSTEMD_UNITS[kind]], capture_output=True)


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of a process and its descendants (beam.smp runs under a shell)."""
    import psutil  # the bench extra; imported here so the tests need no psutil

    try:
        p = psutil.Process(pid)
        procs = [p, *p.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for q in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            t = q.cpu_times()
            total += t.user + t.system
    return total


class LocalCluster:
    """Three server processes, each in its own session so a kill takes its children."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: list[subprocess.Popen[bytes] | None] = [None, None, None]
        self.preexec: Callable[[int], Callable[[], None]] | None = None
        """Run in node ``i``'s child before exec (the bench puts it in a cgroup)."""

    def command(self, i: int) -> tuple[list[str], dict[str, str]]:
        raise NotImplementedError

    def start_node(self, i: int) -> None:
        cmd, env = self.command(i)
        log = open(self.root / f"node{i + 1}.out", "ab")  # noqa: SIM115 - child owns it
        self.procs[i] = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=self.preexec(i) if self.preexec else None)
        log.close()

    def kill(self, i: int) -> None:
        p = self.procs[i]
        if p is not None and p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        self.procs[i] = None

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs if p is not None]

    def log_tail(self, i: int, n: int = 400) -> str:
        with contextlib.suppress(OSError):
            return (self.root / f"node{i + 1}.out").read_text(errors="replace")[-n:]
        return ""

    def close(self) -> None:
        for i in range(len(self.procs)):
            self.kill(i)


class RabbitCluster(LocalCluster):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.epmd_port = free_port()
        self.home = root / "home"
        self.nodes = rabbit_nodes(root, [free_port() for _ in range(3)],
                                  [free_port() for _ in range(3)], f"bench{os.getpid()}")

    def prepare(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        cookie = self.home / ".erlang.cookie"
        cookie.write_text("MQCLUSTERPEERBENCH")
        cookie.chmod(0o600)
        for n in self.nodes:
            n.root.mkdir(parents=True, exist_ok=True)
            (n.root / "rabbitmq.conf").write_text(rabbit_conf(n, self.nodes))
            (n.root / "enabled_plugins").write_text("[].\n")

    def command(self, i: int) -> tuple[list[str], dict[str, str]]:
        return [RABBIT_SERVER], rabbit_env(self.nodes[i], self.home, self.epmd_port)

    def ctl(self, i: int, *args: str, timeout: float = 60) -> str:
        env = {**os.environ, **rabbit_env(self.nodes[i], self.home, self.epmd_port)}
        out = subprocess.run([RABBITMQCTL, "-n", self.nodes[i].name, *args], env=env,
                             capture_output=True, text=True, timeout=timeout)
        if out.returncode:
            raise RuntimeError(f"rabbitmqctl {' '.join(args)}: {out.stderr.strip()[-300:]}")
        return out.stdout

    async def wait_node(self, i: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while True:
            p = self.procs[i]
            if p is not None and p.poll() is not None:
                raise RuntimeError(f"{self.nodes[i].name} exited {p.returncode}: "
                                   f"{self.log_tail(i)}")
            try:
                await asyncio.to_thread(self.ctl, i, "await_startup", "--timeout", "10")
                return
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.nodes[i].name} did not start: {e}") from e
                await asyncio.sleep(1)

    async def start(self) -> None:
        self.prepare()
        # epmd of our own first: a node would start it in its own process tree, and a
        # fault on that node (a stop, a cut) would take the other nodes' name service.
        subprocess.run(["epmd", "-daemon"], check=False, capture_output=True,
                       env={**os.environ, "ERL_EPMD_PORT": str(self.epmd_port)})
        for i in range(3):
            self.start_node(i)
        await asyncio.gather(*(self.wait_node(i) for i in range(3)))
        status = await asyncio.to_thread(self.ctl, 0, "cluster_status", "--formatter", "json")
        missing = [n.name for n in self.nodes if n.name not in status]
        if missing:
            raise RuntimeError(f"cluster did not form, missing {missing}")

    def queue_leader(self, queue: str) -> int:
        for i in range(3):
            if self.procs[i] is None:
                continue
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                out = self.ctl(i, "list_queues", "name", "leader", "--quiet", "--no-table-headers")
                for line in out.splitlines():
                    parts = line.split()
                    if len(parts) == 2 and parts[0] == queue:
                        return [n.name for n in self.nodes].index(parts[1])
        raise RuntimeError(f"no leader found for quorum queue {queue}")

    def close(self) -> None:
        super().close()
        self.stop_epmd()

    def stop_epmd(self) -> None:
        """The nodes start a daemonized epmd on this cluster's own port, outside their
        session; find that one by its environment and end it."""
        import psutil

        for p in psutil.process_iter(["name"]):
            if p.info["name"] != "epmd":
                continue
            with contextlib.suppress(psutil.Error):
                if p.environ().get("ERL_EPMD_PORT") == str(self.epmd_port):
                    p.kill()


class NatsCluster(LocalCluster):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.nodes = nats_nodes(root, [free_port() for _ in range(3)],
                                [free_port() for _ in range(3)])

    def command(self, i: int) -> tuple[list[str], dict[str, str]]:
        return [shutil.which(NATS_SERVER) or NATS_SERVER, "-c",
                str(self.nodes[i].root / "nats.conf")], {}

    def urls(self) -> list[str]:
        return [f"nats://127.0.0.1:{n.port}" for n in self.nodes]

    async def start(self) -> None:
        for n in self.nodes:
            n.root.mkdir(parents=True, exist_ok=True)
            (n.root / "nats.conf").write_text(nats_conf(n, self.nodes))
        for i in range(3):
            self.start_node(i)
        for i, n in enumerate(self.nodes):
            await wait_port(n.port, lambda i=i: self.log_tail(i))


async def wait_port(port: int, why: object, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            _, w = await asyncio.open_connection("127.0.0.1", port)
            w.close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"port {port} not listening: "
                                   f"{why() if callable(why) else why}") from None
            await asyncio.sleep(0.2)
