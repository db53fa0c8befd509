"""A DLedger replica's Raft log and commitlog on a ``chaos.lazyfs`` mount: the entries
it fsynced, and the commitlog bytes they refer to, are there after a power loss; what it
wrote since is gone whole, never half."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from chaos.lazymount import LazyMount
from mqcluster.ha.dledger_entry import region_end
from mqcluster_testing.procs import Procs, procs  # noqa: F401  (``procs`` is a fixture)
from tests.ha.test_dledger_log import Leader, opened

REPO = Path(__file__).resolve().parents[2]
WRITER = f"""
import asyncio, sys
sys.path.insert(0, {str(REPO)!r})
from pathlib import Path
from mqcluster.ha.dledger_log import DLedgerLog
from mqcluster.store import MessageStore
from tests.ha.test_dledger_log import Leader, config_for

async def main(root: Path) -> None:
    store = MessageStore(config_for(root))
    await store.start()
    log = DLedgerLog(root / "dledger", store)
    leader = Leader()
    log.append([leader.entry(i, 1) for i in range(1, 4)])  # fsynced: acknowledged
    log.append([leader.entry(i, 1) for i in range(4, 7)], sync=False)  # written only
    print("written", flush=True)
    await asyncio.sleep(3600)

asyncio.run(main(Path(sys.argv[1])))
"""


def test_fsynced_entries_and_their_messages_survive_a_power_loss(
        lazy_mount: LazyMount, procs: Procs) -> None:  # noqa: F811
    root = lazy_mount.mountpoint / "store"
    writer = procs.python("-c", WRITER, str(root), name="writer")
    deadline = time.monotonic() + 60
    while "written" not in procs.output(writer):
        assert writer.poll() is None and time.monotonic() < deadline, procs.output(writer)
        time.sleep(0.05)
    lost = lazy_mount.power_off_sync()
    procs.kill(writer)
    lazy_mount.mount_sync()
    assert lost, "the writes after the last fsync were dropped"
    leader = Leader()
    acknowledged = [leader.entry(i, 1) for i in range(1, 4)]

    async def check() -> None:
        async with opened(root) as r:
            assert r.log.last_index == 3
            assert r.log.entries(1) == acknowledged
            assert r.store.commitlog_max_offset == region_end(acknowledged[-1].data)

    asyncio.run(check())
