"""Cutting one server process off the network, for the peers bench's partition rows.

The bench enters a network namespace of its own (only loopback, up) before it starts any
server, so every process it starts, and every rule below, lives there and nowhere else.
Each server node joins a cgroup of its own when it starts, before it opens a socket
(``preexec`` for processes the bench spawns, ``cgroup_site/sitecustomize.py`` for the mqcluster
brokers the test harness spawns). ``cut(node)`` then adds nftables rules in the
namespace that drop every packet of that cgroup's sockets, in and out: its listening
ports, the connections others made to it and those it made. Nothing is closed or
refused: as behind a broken switch, open connections stall until their own timeouts.
``heal(node)`` removes the rules.

Why not a namespace per node, as the chaos suite does: RabbitMQ's and NATS's launchers,
and the mqcluster harness, run their nodes on loopback; a cgroup needs no address plan.
nft names a cgroup by its path under ``/sys/fs/cgroup``; where cgroup v2 is mounted
elsewhere (a hybrid hierarchy), nft runs in a private mount namespace with cgroup v2
mounted there.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

CLONE_NEWNET = 0x40000000
SITE_DIR = Path(__file__).with_name("cgroup_site")
MAP_ENV = "MQBENCH_CGROUP_MAP"
"""A file of ``<substring of a command line>\\t<cgroup dir>`` lines read by
``cgroup_site/sitecustomize.py``: a Python child whose command line holds the substring joins."""


def cgroup2_root() -> Path | None:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


def unavailable() -> str | None:
    """Why partitions cannot be made here, or None."""
    if os.geteuid() != 0:
        return "not root (network namespaces and nftables need it)"
    for tool in ("ip", "nft", "unshare"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed"
    if cgroup2_root() is None:
        return "cgroup v2 is not mounted"
    return None


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns(CLONE_NEWNET) failed")


class Partitions:
    """A private network namespace for the bench and a cgroup per server node."""

    def __init__(self) -> None:
        self.run = secrets.token_hex(3)
        self.netns = f"mqbench-{self.run}"
        root = cgroup2_root()
        assert root is not None
        self.cgroup_root = root
        self.base = root / f"mqbench-{self.run}"
        self.map_file: Path | None = None
        self._orig: int | None = None
        self._saved_env: dict[str, str | None] = {}
        self.cut_nodes: set[str] = set()

    # ---- namespace ----

    def enter(self, workdir: Path) -> None:
        """Create the namespace and move this thread (and so everything it starts) into it."""
        subprocess.run(["ip", "netns", "add", self.netns], check=True, capture_output=True)
        subprocess.run(["ip", "-n", self.netns, "link", "set", "lo", "up"], check=True,
                       capture_output=True)
        self.base.mkdir()
        self._orig = os.open("/proc/self/ns/net", os.O_RDONLY)
        fd = os.open(f"/run/netns/{self.netns}", os.O_RDONLY)
        try:
            _setns(fd)
        finally:
            os.close(fd)
        self._nft("add table inet mqbench\n"
                  "add chain inet mqbench egress_cut { type filter hook output priority 0; }\n"
                  "add chain inet mqbench ingress_cut { type filter hook input priority 0; }\n")
        self.map_file = workdir / "cgroups.map"
        self.map_file.write_text("")
        for key, value in ((MAP_ENV, str(self.map_file)),
                           ("PYTHONPATH", os.pathsep.join(
                               filter(None, [str(SITE_DIR), os.environ.get("PYTHONPATH")])))):
            self._saved_env[key] = os.environ.get(key)
            os.environ[key] = value

    def close(self) -> None:
        """Kill what is left in the nodes' cgroups, leave and delete the namespace."""
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        for group in sorted(self.base.glob("*"), reverse=True) if self.base.exists() else []:
            with contextlib.suppress(OSError):
                (group / "cgroup.kill").write_text("1")
        if self._orig is not None:
            _setns(self._orig)
            os.close(self._orig)
            self._orig = None
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True)
        deadline = time.monotonic() + 10
        for group in sorted(self.base.glob("*"), reverse=True) if self.base.exists() else []:
            while True:
                try:
                    group.rmdir()
                    break
                except OSError:  # its last processes are still exiting
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
        with contextlib.suppress(OSError):
            self.base.rmdir()

    # ---- nodes ----

    def cgroup(self, node: str) -> Path:
        path = self.base / node
        path.mkdir(exist_ok=True)
        return path

    def preexec(self, node: str) -> Callable[[], None]:
        """For ``Popen(preexec_fn=...)``: the child joins ``node``'s cgroup before exec."""
        procs = str(self.cgroup(node) / "cgroup.procs")

        def join() -> None:
            fd = os.open(procs, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)

        return join

    def python_child(self, node: str, cmdline_part: str) -> None:
        """A Python child started later whose command line holds ``cmdline_part`` joins
        ``node``'s cgroup at start-up (``cgroup_site/sitecustomize.py``)."""
        assert self.map_file is not None
        with self.map_file.open("a") as f:
            f.write(f"{cmdline_part}\t{self.cgroup(node)}\n")

    def pids(self, node: str) -> list[int]:
        text = (self.cgroup(node) / "cgroup.procs").read_text()
        return [int(p) for p in text.split()]

    # ---- faults ----

    def cut(self, node: str) -> None:
        """Drop every packet of ``node``'s sockets, both ways."""
        if not self.pids(node):
            raise RuntimeError(f"no process in {node}'s cgroup: it would cut nothing")
        path = self.cgroup(node).relative_to(self.cgroup_root)
        level = len(path.parts)
        rule = f'socket cgroupv2 level {level} "{path}" counter drop'
        self._nft(f"add rule inet mqbench egress_cut {rule}\n"
                  f"add rule inet mqbench ingress_cut {rule}\n")
        self.cut_nodes.add(node)

    def heal(self) -> None:
        self._nft("flush chain inet mqbench egress_cut\n"
                  "flush chain inet mqbench ingress_cut\n")
        self.cut_nodes.clear()

    def dropped_packets(self) -> int:
        """Packets the rules dropped so far (proof that a cut took effect)."""
        # Listed from this mount namespace: nft names the cgroups as it finds them here.
        out = self._nft_out("list table inet mqbench\n", resolve_cgroups=False)
        return sum(int(w.split()[0]) for w in out.split("counter packets")[1:])

    def _nft(self, script: str) -> None:
        self._nft_out(script)

    def _nft_out(self, script: str, resolve_cgroups: bool = True) -> str:
        # nft resolves a cgroup path under /sys/fs/cgroup: mount cgroup v2 there first
        # when it lives elsewhere (a hybrid hierarchy), in a mount namespace of nft's own.
        argv = ["nft", "-f", "-"]
        if resolve_cgroups and self.cgroup_root != Path("/sys/fs/cgroup"):
            argv = ["unshare", "-m", "sh", "-c", "mount -t cgroup2 none /sys/fs/cgroup && "
                    "exec nft -f -"]
        done = subprocess.run(argv, input=script, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"nft failed: {done.stderr.strip()[:300]}")
        return done.stdout
