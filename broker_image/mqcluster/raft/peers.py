"""Who may speak for a member: a Raft message is taken only from a configured peer.

A message names its sender (``src``); that id must be one of the group's configured
peers, and the connection it arrives on must come from that peer's configured host
(an IP address, or a name resolved to its addresses, again when a peer's address
seems to have changed, as a restarted pod's does). Everything else, a stranger's
bigger term included, is refused with its connection: it never reaches the core.

Members connect to each other from their own configured host (``connect_from``), so
peers on one machine at distinct loopback addresses (127.0.0.x, as local groups and
tests run them) are told apart too.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Mapping

from mqcluster.wire.rpc import STREAM_LIMIT, Connection, HandlerRegistry, RpcError, split_addr

log = logging.getLogger(__name__)

_REFRESH_EVERY = 1.0  # seconds between re-resolving the peers' host names
_RESOLVE_TIMEOUT = 2.0
HOSTS_ENV = "MQCLUSTER_RAFT_PEER_HOSTS"


def hosts_checked() -> bool:
    """Whether connections must come from the sender's configured host: yes unless
    ``MQCLUSTER_RAFT_PEER_HOSTS=any`` (peers behind NAT, whose connections arrive from
    another address); the sender must be a configured peer either way."""
    value = os.environ.get(HOSTS_ENV, "check").strip().lower()
    if value not in ("check", "any"):
        log.warning("%s=%r is neither 'check' nor 'any': checking hosts", HOSTS_ENV, value)
        return True
    return value == "check"


def normal_ip(host: str) -> str | None:
    """``host`` as an IP address in canonical form (IPv4-mapped IPv6 as IPv4); None
    for a name."""
    try:
        ip = ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def remote_ip(conn: Connection) -> str | None:
    """The IP address the connection comes from, canonical (None if not an IP socket)."""
    peer = conn.writer.get_extra_info("peername")
    if isinstance(peer, tuple) and peer and isinstance(peer[0], str):
        return normal_ip(peer[0])
    return None


async def resolve_ips(host: str) -> frozenset[str]:
    """``host``'s addresses in canonical form (an IP address is its own); OSError or
    TimeoutError if a name cannot be resolved within _RESOLVE_TIMEOUT seconds."""
    ip = normal_ip(host)
    if ip is not None:
        return frozenset({ip})
    infos = await asyncio.wait_for(
        asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM),
        _RESOLVE_TIMEOUT)
    found = {normal_ip(str(info[4][0])) for info in infos}
    return frozenset(i for i in found if i is not None)


class Refresher:
    """Runs ``work`` in the background when asked (``soon``): one run at a time, and none
    within ``every`` seconds of the last one's start, so a flood of refused connections
    costs at most one lookup a second."""

    def __init__(self, work: Callable[[], Awaitable[None]], name: str, *,
                 clock: Callable[[], float], every: float = _REFRESH_EVERY) -> None:
        self._work = work
        self._name = name
        self._clock = clock
        self._every = every
        self._last = float("-inf")
        self.task: asyncio.Task[None] | None = None  # the latest background run

    async def run(self) -> None:
        """Run ``work`` now; it counts as the last run."""
        self._last = self._clock()
        await self._work()

    def soon(self) -> None:
        if self.task is not None and not self.task.done():
            return
        if self._clock() - self._last < self._every:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self.task = loop.create_task(self.run(), name=self._name)

    async def close(self) -> None:
        task = self.task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class PeerGate:
    """Decides whether a message claiming to come from ``src`` over a connection from
    ``remote`` is taken. Names are resolved by ``resolve`` (at start) and, at most once a
    second, again whenever a configured peer seems to come from another address."""

    def __init__(self, peers: Mapping[str, str], *, check_hosts: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.hosts = {peer: split_addr(addr)[0] for peer, addr in peers.items()}
        self.check_hosts = check_hosts
        self._addrs: dict[str, frozenset[str]] = {}
        for peer, host in self.hosts.items():
            ip = normal_ip(host)
            self._addrs[peer] = frozenset({ip}) if ip is not None else frozenset()
        self._names = {peer for peer, host in self.hosts.items() if normal_ip(host) is None}
        self.refresher = Refresher(self._resolve_names, "raft-peer-resolve", clock=clock)

    def addresses(self, peer: str) -> frozenset[str]:
        return self._addrs.get(peer, frozenset())

    def refusal(self, src: str, remote: str | None) -> str | None:
        """None if a message from ``src`` over a connection from ``remote`` is taken, else
        why not."""
        host = self.hosts.get(src)
        if host is None:
            return f"sender {src!r} is not a configured peer"
        if not self.check_hosts:
            return None
        if remote is not None and remote in self._addrs[src]:
            return None
        if src in self._names:
            self.refresher.soon()
        return f"sender {src!r} is configured at {host}, but the connection comes from {remote}"

    async def resolve(self) -> None:
        """Resolve every peer given by name now, all at once (those that fail keep what
        they had: a peer whose pod does not exist yet is looked up again later)."""
        if self._names:
            await self.refresher.run()

    async def _resolve_names(self) -> None:
        peers = sorted(self._names)
        found = await asyncio.gather(*(self._lookup(self.hosts[p]) for p in peers))
        for peer, addrs in zip(peers, found, strict=True):
            if addrs is not None:
                self._addrs[peer] = addrs

    @staticmethod
    async def _lookup(host: str) -> frozenset[str] | None:
        try:
            return await resolve_ips(host)
        except (OSError, TimeoutError) as exc:
            log.info("cannot resolve peer host %s: %s", host, exc)
            return None

    async def close(self) -> None:
        await self.refresher.close()


class PeerClient:
    """This member's connections to its peers, one per address, made from its own
    configured host so the peers' ``PeerGate`` recognizes it. Where that address cannot
    be bound (a name for an address of another machine, as behind NAT) it connects
    unbound, and says so once."""

    def __init__(self, source_host: str | None, *, connect_timeout: float = 0.5) -> None:
        ip = normal_ip(source_host) if source_host else None
        self.source_host = source_host if source_host and ip not in ("0.0.0.0", "::") else None
        self.connect_timeout = connect_timeout
        self._conns: dict[str, Connection] = {}
        self._warned = False

    async def connection(self, addr: str) -> Connection:
        """The open connection to ``addr``, made now if there is none (RpcError if not)."""
        conn = self._conns.get(addr)
        if conn is not None and not conn.closed:
            return conn
        host, port = split_addr(addr)
        try:
            conn = await self._connect(host, port)
        except (OSError, TimeoutError) as exc:
            raise RpcError(f"cannot connect to {addr}: {exc or 'timeout'}") from exc
        self._conns[addr] = conn
        return conn

    async def _connect(self, host: str, port: int) -> Connection:
        if self.source_host is not None:
            try:
                return await self._open(host, port, (self.source_host, 0))
            except OSError as exc:
                if exc.errno != errno.EADDRNOTAVAIL:
                    raise
                if not self._warned:
                    log.warning("cannot connect to peers from this member's configured host "
                                "%s (%s); connecting from any address, which peers that "
                                "check hosts refuse", self.source_host, exc)
                    self._warned = True
                self.source_host = None
        return await self._open(host, port, None)

    async def _open(self, host: str, port: int, local: tuple[str, int] | None) -> Connection:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, limit=STREAM_LIMIT, local_addr=local),
            self.connect_timeout)
        return Connection(reader, writer, HandlerRegistry())

    async def close(self) -> None:
        for conn in list(self._conns.values()):
            await conn.close()
        self._conns.clear()
