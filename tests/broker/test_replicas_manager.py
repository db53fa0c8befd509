"""``ReplicasManager``'s conversation with the controller, on a stand-in manager."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from mqcluster.broker import replicas_manager
from mqcluster.broker.broker_identity import BrokerIdentityRecord, Registration
from mqcluster.broker.replicas_manager import ReplicasManager
from mqcluster.client.controller import ReplicaInfo
from mqcluster.wire.rpc import RpcError


async def test_a_failed_first_heartbeat_leaves_the_periodic_jobs_running(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def register(*_args: Any) -> Registration:
        return Registration(2, BrokerIdentityRecord("c", "bg", 2, "x"),
                            ReplicaInfo(None, "", 0, set(), 0))

    async def heartbeat() -> None:
        raise RpcError("request code 904 to 127.0.0.1:9878 timed out")

    async def job() -> None:
        await asyncio.Event().wait()

    monkeypatch.setattr(replicas_manager, "register_with_controller", register)
    manager: Any = SimpleNamespace(
        config=SimpleNamespace(storePathRootDir="/x", brokerClusterName="c", brokerName="bg",
                               brokerHeartbeatInterval=1000, syncBrokerMetadataPeriod=1000,
                               syncControllerMetadataPeriod=1000, slaveSyncInterval=1000),
        client=None, ctx=SimpleNamespace(addresses=SimpleNamespace(broker="127.0.0.1:10911")),
        broker_id=None, _tasks=[], _heartbeat=heartbeat, apply=job,
        _poll_replica_info=job, _find_active=job, _sync_from_master=job,
        _every=ReplicasManager._every)
    await ReplicasManager._register_then_run(manager)
    try:
        assert manager.broker_id == 2
        assert len(manager._tasks) == 4 and not any(t.done() for t in manager._tasks)
    finally:
        for task in manager._tasks:
            task.cancel()
