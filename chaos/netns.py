"""Hosts in network namespaces on one bridge, and real partitions between them.

Each host is a namespace ``mqc<run>-<name>`` with its loopback up and one veth pair
whose other end is a port of the run's bridge ``mq<run>br`` in the root namespace.
The bridge holds ``10.<s>.0.1/16`` so the runner can reach every host; host ``k`` gets
``10.<s>.0.<k+2>``. ``<run>`` is random and ``<s>`` a /16 no interface uses yet, so
parallel runs never clash.

Partitions need no firewall (neither iptables nor nft is installed here): a pair of
hosts is cut by a ``blackhole`` route to the other's address inside each namespace, so
packets vanish silently in both directions and open TCP connections stall as they
would behind a broken switch; ``isolate`` takes a host's link down altogether.
``close()`` deletes the namespaces (their veths go with them) and the bridge.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
from dataclasses import dataclass, field


class NetnsUnavailable(RuntimeError):
    """This machine does not let us create namespaces (not root, no iproute2, ...)."""


def ip(*args: str, ns: str | None = None, check: bool = True) -> str:
    argv = ["ip", *(["netns", "exec", ns, "ip"] if ns else []), *args]
    done = subprocess.run(argv, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")
    return done.stdout


def probe() -> str | None:
    """Why namespaces cannot be used here, or None when they can."""
    name = f"mqcprobe{secrets.token_hex(3)}"
    try:
        done = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    except FileNotFoundError:
        return "the `ip` command (iproute2) is not installed"
    if done.returncode != 0:
        return f"`ip netns add` is not permitted here: {done.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return None


def _free_subnet() -> int:
    used = ip("-o", "-4", "addr", "show")
    routes = ip("-4", "route", "show", "table", "all")
    for _ in range(200):
        s = 64 + secrets.randbelow(190)
        if f" 10.{s}." not in used and f"10.{s}." not in routes:
            return s
    raise RuntimeError("no free 10.x.0.0/16 subnet")


@dataclass
class Host:
    name: str
    ns: str
    address: str
    veth: str
    """The root-namespace end of the host's link."""
    blackholed: set[str] = field(default_factory=set)

    def command(self, argv: list[str], env: dict[str, str] | None = None) -> list[str]:
        """``argv`` run inside the namespace (``ip netns exec`` and ``env`` both exec, so
        the pid a caller gets is the program's own)."""
        extra = ["env", *(f"{k}={v}" for k, v in (env or {}).items())] if env else []
        return ["ip", "netns", "exec", self.ns, *extra, *argv]


class Network:
    def __init__(self) -> None:
        self.run = secrets.token_hex(2)
        self.bridge = f"mq{self.run}br"
        self.subnet = 0
        self.hosts: dict[str, Host] = {}

    def __enter__(self) -> Network:
        self.create()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def create(self) -> None:
        reason = probe()
        if reason is not None:
            raise NetnsUnavailable(reason)
        self.subnet = _free_subnet()
        ip("link", "add", self.bridge, "type", "bridge")
        ip("addr", "add", f"10.{self.subnet}.0.1/16", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")

    def add_host(self, name: str) -> Host:
        k = len(self.hosts)
        host = Host(name, f"mqc{self.run}-{name}", f"10.{self.subnet}.0.{k + 2}",
                    f"mq{self.run}v{k}")
        self.hosts[name] = host
        peer = f"mq{self.run}p{k}"
        ip("netns", "add", host.ns)
        ip("link", "add", host.veth, "type", "veth", "peer", "name", peer)
        ip("link", "set", peer, "netns", host.ns)
        ip("link", "set", host.veth, "master", self.bridge)
        ip("link", "set", host.veth, "up")
        ip("link", "set", "lo", "up", ns=host.ns)
        ip("link", "set", peer, "name", "eth0", ns=host.ns)
        ip("addr", "add", f"{host.address}/16", "dev", "eth0", ns=host.ns)
        ip("link", "set", "eth0", "up", ns=host.ns)
        return host

    # ------------------------------------------------------------------ faults

    def partition(self, a: Host, b: Host) -> None:
        """Drop every packet between ``a`` and ``b`` (both directions)."""
        for src, dst in ((a, b), (b, a)):
            if dst.address not in src.blackholed:
                ip("route", "add", "blackhole", f"{dst.address}/32", ns=src.ns)
                src.blackholed.add(dst.address)

    def heal(self, a: Host, b: Host) -> None:
        for src, dst in ((a, b), (b, a)):
            if dst.address in src.blackholed:
                ip("route", "del", "blackhole", f"{dst.address}/32", ns=src.ns)
                src.blackholed.discard(dst.address)

    def heal_all(self) -> None:
        for a in self.hosts.values():
            for b in self.hosts.values():
                self.heal(a, b)

    def isolate(self, host: Host) -> None:
        ip("link", "set", host.veth, "down")

    def rejoin(self, host: Host) -> None:
        ip("link", "set", host.veth, "up")

    # ------------------------------------------------------------------ teardown

    def close(self) -> None:
        """SIGKILL whatever still runs in the hosts (a namespace lives on, veth and all,
        while a process is in it), then delete the namespaces and the bridge."""
        for host in self.hosts.values():
            for pid in ip("netns", "pids", host.ns, check=False).split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
        for host in self.hosts.values():
            ip("netns", "del", host.ns, check=False)
        if self.subnet:
            ip("link", "del", self.bridge, check=False)
        self.hosts.clear()
