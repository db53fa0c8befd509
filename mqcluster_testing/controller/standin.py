"""A broker stand-in for tests and benchmarks: registers and heartbeats through the real API.

It obtains its id (``broker_identity``), registers, heartbeats every
``heartbeat_interval`` to every controller, and serves
NOTIFY_BROKER_ROLE_CHANGED on its own listen address, recording what it is
told. It stores no messages. ``python -m mqcluster_testing.controller.standin`` runs
one as a process (for SIGKILL / SIGSTOP experiments) and prints its
registration as one JSON line, then one JSON line per heartbeat batch.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path

from mqcluster.broker.broker_identity import Registration, register_with_controller
from mqcluster.client.controller import ControllerClient, ReplicaInfo
from mqcluster.protocol.controller import (
    BrokerHeartbeatRequestHeader,
    NotifyBrokerRoleChangedRequestHeader,
    RequestCode,
    SyncStateSetBody,
    response,
)
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.rpc import Connection, HandlerRegistry, RpcServer


class StandInBroker:
    def __init__(
        self,
        controller_addrs: str | list[str],
        cluster: str,
        broker_name: str,
        store_dir: str | Path,
        *,
        host: str = "127.0.0.1",
        epoch: int = 0,
        max_offset: int = 0,
        election_priority: int = 0,
        heartbeat_interval: float = 0.5,
        heartbeat_timeout_ms: int = 2000,
    ) -> None:
        self.cluster = cluster
        self.broker_name = broker_name
        self.store_dir = Path(store_dir)
        self.epoch = epoch
        self.max_offset = max_offset
        self.election_priority = election_priority
        self.heartbeat_interval = heartbeat_interval
        self.heartbeat_timeout_ms = heartbeat_timeout_ms
        self.client = ControllerClient(controller_addrs, retry_timeout=15.0)
        registry = HandlerRegistry()
        registry.register(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, self._on_notify)
        self.server = RpcServer(host, 0, registry)
        self.registration: Registration | None = None
        self.notifications: list[tuple[NotifyBrokerRoleChangedRequestHeader, set[int]]] = []
        self.notified = asyncio.Event()
        self.last_heartbeat_wall_ms: int | None = None
        self._beating: asyncio.Task[None] | None = None

    @property
    def addr(self) -> str:
        return f"{self.server.host}:{self.server.port}"

    @property
    def broker_id(self) -> int:
        assert self.registration is not None, "not registered"
        return self.registration.broker_id

    async def start(self, *, heartbeat: bool = True) -> Registration:
        await self.server.start()
        self.registration = await register_with_controller(
            self.client, self.store_dir, self.cluster, self.broker_name, self.addr
        )
        if heartbeat:
            await self.heartbeat_once()
            self._beating = asyncio.create_task(self._heartbeat_loop())
        return self.registration

    def header(self) -> BrokerHeartbeatRequestHeader:
        return BrokerHeartbeatRequestHeader(
            cluster_name=self.cluster,
            broker_addr=self.addr,
            broker_name=self.broker_name,
            broker_id=self.registration.broker_id if self.registration else None,
            epoch=self.epoch,
            max_offset=self.max_offset,
            confirm_offset=self.max_offset,
            heartbeat_timeout_mills=self.heartbeat_timeout_ms,
            election_priority=self.election_priority,
        )

    async def heartbeat_once(self, *, wait: bool = True) -> None:
        """One heartbeat to every controller; ``wait`` until each has recorded it."""
        await self.client.heartbeat(self.header(), oneway=not wait)
        self.last_heartbeat_wall_ms = int(time.time() * 1000)

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            await self.heartbeat_once(wait=False)

    async def stop_heartbeats(self) -> None:
        """Go silent but keep connections open (a hung broker, as seen from outside)."""
        if self._beating is not None:
            self._beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._beating
            self._beating = None

    async def replica_info(self) -> ReplicaInfo:
        return await self.client.get_replica_info(self.broker_name)

    async def close(self) -> None:
        """Stop heartbeats and close every connection (a dead broker)."""
        await self.stop_heartbeats()
        await self.client.close()
        await self.server.stop()

    async def _on_notify(self, cmd: RemotingCommand, _conn: Connection) -> RemotingCommand:
        h = NotifyBrokerRoleChangedRequestHeader.from_command(cmd)
        members = SyncStateSetBody.decode(cmd.body).sync_state_set if cmd.body else set()
        self.notifications.append((h, members))
        self.notified.set()
        return response(cmd)


async def _run(args: argparse.Namespace) -> None:
    broker = StandInBroker(
        args.controllers,
        args.cluster,
        args.broker_name,
        args.store,
        host=args.host,
        epoch=args.epoch,
        max_offset=args.max_offset,
        election_priority=args.priority,
        heartbeat_interval=args.heartbeat_interval,
        heartbeat_timeout_ms=args.heartbeat_timeout_ms,
    )
    reg = await broker.start(heartbeat=False)
    await broker.heartbeat_once(wait=True)
    info = reg.replica_info
    print(
        json.dumps(
            {
                "event": "registered",
                "brokerId": reg.broker_id,
                "addr": broker.addr,
                "masterBrokerId": info.master_broker_id,
                "masterEpoch": info.master_epoch,
            }
        ),
        flush=True,
    )
    while True:
        await broker.heartbeat_once(wait=False)
        print(json.dumps({"event": "heartbeat", "wallMs": broker.last_heartbeat_wall_ms}),
              flush=True)
        await asyncio.sleep(args.heartbeat_interval)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="mqcluster_testing.controller.standin")
    p.add_argument("--controllers", required=True)
    p.add_argument("--cluster", default="DefaultCluster")
    p.add_argument("--broker-name", required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--epoch", type=int, default=0)
    p.add_argument("--max-offset", type=int, default=0)
    p.add_argument("--priority", type=int, default=0)
    p.add_argument("--heartbeat-interval", type=float, default=0.5)
    p.add_argument("--heartbeat-timeout-ms", type=int, default=2000)
    args = p.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
