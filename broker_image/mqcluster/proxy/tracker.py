"""Follows the group's master and tells the forwarding handler when it moves."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from mqcluster.broker.context import ReplicaRole
from mqcluster.proxy.master_source import MasterSighting, MasterSource

log = logging.getLogger(__name__)

NOT_A_REPLICA = -1
RoleListener = Callable[[ReplicaRole, ReplicaRole], None]
GrpcResolver = Callable[[str], Awaitable[str | None]]


class MasterTracker:
    """Polls ``source`` every ``interval`` seconds; ``role()`` is what the forwarding
    handler reads (never "master": the proxy stores nothing), listeners hear of every
    change. A source that fails keeps the last known master: the forwarded calls
    themselves show whether it still answers."""

    def __init__(self, source: MasterSource, resolve_grpc: GrpcResolver,
                 interval: float) -> None:
        self.source = source
        self.resolve_grpc = resolve_grpc
        self.interval = interval
        self.listeners: list[RoleListener] = []
        self.on_lookup_failure: Callable[[], None] | None = None
        self._role = ReplicaRole(NOT_A_REPLICA, False)
        self._epoch = -1
        self._grpc: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None

    def role(self) -> ReplicaRole:
        return self._role

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="master-tracker")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.source.close()

    async def _run(self) -> None:
        while True:
            try:
                await self.poll_once()
            except Exception as exc:  # a controller restarting: keep the last answer
                log.debug("master lookup failed: %s", exc)
                if self.on_lookup_failure is not None:
                    self.on_lookup_failure()
            await asyncio.sleep(self.interval)

    async def poll_once(self) -> None:
        seen = await self.source.master()
        if seen.epoch < self._epoch:
            return  # an older answer (a controller that has not caught up)
        if seen.address == self._role.master_addr and seen.epoch == self._epoch:
            return
        grpc = await self._grpc_of(seen)
        if seen.address is not None and grpc is None:
            return  # cannot reach the new master yet: look again next round
        self._epoch = seen.epoch
        if (seen.address, grpc) != (self._role.master_addr, self._role.master_grpc):
            self._set(ReplicaRole(NOT_A_REPLICA, False, seen.address, grpc, seen.epoch))

    async def _grpc_of(self, seen: MasterSighting) -> str | None:
        if seen.address is None:
            return None
        if seen.grpc:
            return seen.grpc
        known = self._grpc.get(seen.address)
        if known is None:
            try:
                known = await self.resolve_grpc(seen.address)
            except Exception as exc:
                log.info("master %s does not tell its gRPC endpoint yet: %s", seen.address, exc)
                return None
            if known:
                self._grpc[seen.address] = known
        return known

    def _set(self, new: ReplicaRole) -> None:
        old, self._role = self._role, new
        log.info("master of the group: %s (gRPC %s, epoch %d)", new.master_addr,
                 new.master_grpc, new.master_epoch)
        for listener in self.listeners:
            listener(old, new)
