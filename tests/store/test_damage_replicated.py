"""A replica whose recovery cut off damaged records takes them again from its master.

The HA stream needs nothing new for this: after recovery the slave's commitlog ends
lower, it reports that offset in its handshake, and the master transfers from there.
"""

from __future__ import annotations

import random
from pathlib import Path

from mqcluster.broker.server import BrokerServer
from mqcluster.store.message import MessageRecord, PutStatus
from mqcluster_testing.ha.group import TOPIC, GroupHarness, wait_until
from tests.ha.test_master_slave import Start, in_sync, pair  # noqa: F401  (``pair``: fixture)


def commitlog(b: BrokerServer) -> bytes:
    store = b.context.store
    out = b""
    while len(out) < store.commitlog_max_offset:
        out += store.read_commitlog(len(out), store.commitlog_max_offset - len(out))
    return out


async def test_a_slave_refetches_what_its_recovery_cut_off(pair: Start) -> None:  # noqa: F811
    master, slave = await pair("SYNC_MASTER")
    await wait_until(lambda: in_sync(master))
    results = []
    for i in range(300):
        r = await master.context.store.put_message(MessageRecord(TOPIC, 0, f"m{i}".encode() * 8))
        assert r.status is PutStatus.PUT_OK
        results.append(r)
    wanted = commitlog(master)
    assert commitlog(slave) == wanted
    cfg = slave.config
    await slave.stop()

    bad = results[250].commitlog_offset
    segment = Path(cfg.storePathRootDir) / "commitlog" / f"{0:020d}"
    with open(segment, "r+b") as f:  # random bytes inside record 250 of the slave's copy
        f.seek(bad + 30)
        f.write(random.Random(250).randbytes(20))

    again = BrokerServer(cfg)
    await again.start()
    try:
        report = again.context.store.recovery
        assert report is not None and report.truncated_at == bad
        assert (report.records_lost, report.intact_lost) == (50, 49)
        assert report.set_aside and Path(report.set_aside[0]).exists()
        # The master sends the cut-off range again: the copies are the same bytes.
        await wait_until(lambda: again.context.store.commitlog_max_offset == len(wanted))
        assert commitlog(again) == wanted
        await wait_until(lambda: again.context.store.max_offset(TOPIC, 0) == 300)
        got = again.context.store.get_messages(TOPIC, 0, 250, 50)
        assert [m.body for m in got.messages] == [f"m{i}".encode() * 8 for i in range(250, 300)]
    finally:
        await again.stop()


async def test_a_controller_mode_slave_refetches_what_its_recovery_cut_off(
        tmp_path: Path) -> None:
    g = GroupHarness(tmp_path, 2)
    await g.start()
    try:
        m = await g.wait_master()
        s = 1 - m
        results = []
        for i in range(300):
            r = await g.put(m, f"m{i}".encode() * 8)
            assert r.status is PutStatus.PUT_OK, r
            results.append(r)
        wanted = commitlog(g.broker(m))
        await g.wait_for(lambda: g.broker(s).context.store.commitlog_max_offset == len(wanted))
        await g.kill(s)

        bad = results[250].commitlog_offset
        segment = Path(g.configs[s].storePathRootDir) / "commitlog" / f"{0:020d}"
        with open(segment, "r+b") as f:
            f.seek(bad + 30)
            f.write(random.Random(251).randbytes(20))

        again = await g.start_broker(s)
        report = again.context.store.recovery
        assert report is not None and report.truncated_at == bad
        assert (report.records_lost, report.intact_lost) == (50, 49)
        await g.wait_for(lambda: again.context.store.commitlog_max_offset == len(wanted))
        assert commitlog(again) == wanted
    finally:
        await g.stop()
