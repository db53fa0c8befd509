"""A hung master is replaced with the failure detection that ships (no tuned values).

Each mode's group runs with its processes' defaults for every failure-detection key; the
master is SIGSTOPped and a new master must be elected while the old one is still stopped
(no connection closes, so only heartbeat silence can show it). How soon is measured by
``python -m bench ha`` / ``dledger`` / ``peers`` with the same defaults, not asserted
here; the tests print what they saw.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from mqcluster.broker.config import BrokerConfig
from mqcluster.client import AdminClient, Message, Producer
from mqcluster_testing.ha.brokers import running
from mqcluster_testing.ha.cluster import (
    FAST_BROKER_DETECTION,
    FAST_CONTROLLER_DETECTION,
    ProcessGroup,
)
from mqcluster_testing.ha.dledger_cluster import DLedgerProcessGroup

pytestmark = pytest.mark.slow
TOPIC = "ShippedDetection"
DLEDGER_KEYS = ("heartBeatTimeIntervalMs", "maxHeartBeatLeak")


async def send_some(addr: str, n: int = 5) -> None:
    async with AdminClient(broker_addr=addr) as admin:
        await admin.create_topic(TOPIC, queue_nums=2)
    async with Producer(broker_addr=addr, retries=2) as producer:
        for i in range(n):
            await producer.send(Message(TOPIC, f"m{i}".encode()))


async def leader_among(g: DLedgerProcessGroup, replicas: list[int]) -> int:
    """The first of ``replicas`` to say it leads (a stopped replica is not asked: its
    port accepts and never answers)."""
    async with asyncio.timeout(30):
        while True:
            for i in replicas:
                status = await g.status(i)
                if status is not None and status.get("role") == "LEADER":
                    return i
            await asyncio.sleep(0.02)


async def test_hung_controller_mode_master_is_replaced_by_heartbeat_timeout(
        tmp_path: Path) -> None:
    g = ProcessGroup(tmp_path, detection="shipped")
    assert not set(FAST_CONTROLLER_DETECTION) & set(g.controllers.options)
    assert not set(FAST_BROKER_DETECTION) & set(g.broker_props), "the shipped defaults"
    async with running(g, lambda: g.wait_sync_state_set(3)):
        old = await g.wait_master()
        await send_some(g.brokers[old].addr)
        before = await g.elections()
        stopped = time.monotonic()
        g.hang(old)
        try:
            new = await g.wait_master(30, not_index=old)
            elected = time.monotonic() - stopped
            assert g.alive(old), "the old master is still there, stopped, not dead"
            after = [e for e in await g.elections() if e not in before]
        finally:
            g.wake(old)
        assert new != old
        replacing = [e for e in after
                     if e["new_master"] is not None and e["new_master"] != e["old_master"]]
        assert replacing, f"no election recorded: {after}"
        # Silence, not a closed connection, found the hung master: the scan saw its
        # heartbeat time out, or a slave's heartbeat found the group without a live master.
        assert replacing[-1]["trigger"] in ("heartbeat_timeout", "heartbeat"), replacing
        print(f"new master seen {elected:.2f} s after SIGSTOP; controller: detection "
              f"{replacing[-1]['detection_ms']} ms after the last heartbeat, consensus "
              f"{replacing[-1]['consensus_ms']} ms")
        await send_some(g.brokers[new].addr)


async def test_hung_dledger_leader_is_replaced_with_shipped_timeouts(tmp_path: Path) -> None:
    g = DLedgerProcessGroup(tmp_path)
    assert not set(DLEDGER_KEYS) & set(g.props), "the shipped defaults"
    shipped = BrokerConfig.model_fields
    async with running(g, g.wait_leader):
        old = await g.wait_leader()
        await send_some(g.brokers[old].addr)
        status = await g.status(old)
        assert status is not None
        stopped = time.monotonic()
        g.hang(old)
        try:
            new = await leader_among(g, [i for i in range(3) if i != old])
            elected = time.monotonic() - stopped
            assert g.alive(old), "the old leader is still there, stopped, not dead"
            new_status = await g.status(new)
        finally:
            g.wake(old)
        assert new_status is not None and new_status["term"] > status["term"]
        print(f"new leader seen {elected:.2f} s after SIGSTOP (silence timeout "
              f"{shipped['heartBeatTimeIntervalMs'].default} ms x "
              f"{shipped['maxHeartBeatLeak'].default})")
        await g.wait_leader()
        await asyncio.wait_for(send_some(g.brokers[await g.wait_leader()].addr), 30)
