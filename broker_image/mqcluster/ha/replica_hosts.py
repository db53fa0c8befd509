"""Which hosts may connect to a controller-mode master as which slave.

A slave's handshake names its broker id; the master streams its commitlog to it and
counts its acks as that replica's copy (the SyncStateSet and ``allAckInSyncStateSet``
rest on them), and a second connection under the same id replaces the first. So in
controller mode the master takes a slave only from the host the controller has
registered for that broker id in this group (``brokerAddress`` of ApplyBrokerId /
RegisterBroker), as the controller's replica table lists it. An id the table does not
list, or a connection from another host, is refused; the table is read again (at most
once a second) whenever that happens, so a replica that registered or moved a moment
ago gets in on its next attempt.

Classic master-slave mode configures no slave addresses (RocketMQ has none): there the
master takes every slave, and the HA port is for the group's network only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from mqcluster.raft.peers import Refresher, resolve_ips
from mqcluster.wire.ratelog import RateLimitedLog

log = logging.getLogger(__name__)

Fetch = Callable[[], Awaitable[dict[int, str]]]
"""The group's registered replicas: broker id -> ``host:port``."""

class ReplicaHosts:
    def __init__(self, fetch: Fetch, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._fetch = fetch
        self._hosts: dict[int, frozenset[str]] | None = None  # None: never read yet
        self.refresher = Refresher(self._read, "ha-replica-hosts", clock=clock)
        self._refusals_log = RateLimitedLog(log, interval=60.0, clock=clock)

    def hosts(self, broker_id: int) -> frozenset[str]:
        return (self._hosts or {}).get(broker_id, frozenset())

    def refusal(self, broker_id: int, remote: str | None) -> str | None:
        """None if slave ``broker_id`` may connect from ``remote`` (an IP), else why not."""
        hosts = self._hosts
        if hosts is not None and remote is not None and remote in hosts.get(broker_id, ()):
            return None
        self.refresh_soon()
        if hosts is None:
            return "the group's replicas are not known yet"
        if broker_id not in hosts:
            return f"broker id {broker_id} is not a registered replica of this group"
        return (f"broker id {broker_id} is registered at {', '.join(sorted(hosts[broker_id]))},"
                f" not {remote}")

    def log_refusal(self, peer: object, reason: str) -> None:
        """A warning per remote host at most once a minute (a flood stays quiet)."""
        host = str(peer[0]) if isinstance(peer, tuple) and peer else str(peer)
        self._refusals_log.warning(host, "HA connection from %s refused: %s", peer, reason)

    async def refresh(self) -> None:
        """Read the replica table now (kept as it was if the controller does not answer)."""
        await self.refresher.run()

    def refresh_soon(self) -> None:
        self.refresher.soon()

    async def _read(self) -> None:
        try:
            table = await self._fetch()
        except Exception as exc:  # the controller's client raises several kinds
            log.info("cannot read this group's replicas from the controller: %s", exc)
            return
        hosts: dict[int, frozenset[str]] = {}
        for broker_id, addr in table.items():
            try:
                hosts[broker_id] = await resolve_ips(addr.rpartition(":")[0] or addr)
            except (OSError, TimeoutError):
                hosts[broker_id] = self.hosts(broker_id)
        self._hosts = hosts

    async def close(self) -> None:
        await self.refresher.close()
