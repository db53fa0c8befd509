"""DLedger mode as real processes: the official client, configured with the three
replicas' endpoints, keeps sending while the leader is SIGKILLed 20 times."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mqcluster.broker.dledger import PROPERTY_DLEDGER_INDEX
from mqcluster_testing.ha.brokers import running
from mqcluster_testing.ha.dledger_cluster import DLedgerProcessGroup
from tests.ha.test_processes import TOPIC, History, produce, wait_acks

pytestmark = pytest.mark.slow


@pytest.fixture
async def group(tmp_path: Path) -> AsyncIterator[DLedgerProcessGroup]:
    g = DLedgerProcessGroup(tmp_path, preferredLeaderIds="n0")
    async with running(g, g.wait_leader):
        yield g


async def test_sigkill_leader_twenty_times(group: DLedgerProcessGroup) -> None:
    g = group
    history = History()
    rng = random.Random(5)
    worker = threading.Thread(target=produce, args=(g.endpoints, history), daemon=True)
    worker.start()
    try:
        await wait_acks(history, 20)
        for _ in range(20):
            leader = await g.wait_leader()
            await asyncio.sleep(rng.uniform(0.2, 1.0))
            await g.kill(leader)
            await g.wait_leader(not_index=leader)
            await g.restart(leader)
            await wait_acks(history, len(history.acked) + 5)
        await wait_acks(history, len(history.acked) + 20)
    finally:
        history.stop.set()
        await asyncio.to_thread(worker.join, 30)
    assert await g.wait_leader(want=0) == 0, "the preferred replica leads again"
    await g.wait_caught_up()
    await g.stop_brokers()
    logs = [g.commitlog(i).rstrip(b"\0") for i in range(3)]
    assert logs[0] == logs[1] == logs[2], "replicas identical up to the commit index"
    stored = [m for m in g.messages(0) if m.topic == TOPIC]
    positions = [m.properties[PROPERTY_DLEDGER_INDEX] for m in stored]
    assert len(positions) == len(set(positions)), "nothing stored twice by replication"
    present = {m.body.decode() for m in stored}
    lost = set(history.acked) - present
    assert not lost, f"{len(lost)} acknowledged messages lost: {sorted(lost)[:10]}"
    retries = len(stored) - len(present)
    print(f"acked {len(history.acked)}, failed sends {len(history.failed)}, client retries "
          f"stored twice {retries}, longest gap {history.longest_gap():.2f} s")
