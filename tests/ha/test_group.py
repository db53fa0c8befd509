"""Controller-mode groups in one process: replication, failover, truncation, SyncStateSet."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mqcluster.store.message import PutStatus
from tests.ha.group import GroupHarness


@pytest.fixture
async def group3(tmp_path: Path) -> AsyncIterator[GroupHarness]:
    g = GroupHarness(tmp_path, 3)
    try:
        await g.start()
        yield g
    finally:
        await g.stop()


def commitlog_bytes(g: GroupHarness, i: int, end: int) -> bytes:
    store = g.broker(i).context.store
    out = b""
    while len(out) < end:
        chunk = store.read_commitlog(len(out), end - len(out))
        assert chunk, f"replica {i} has only {len(out)} of {end} bytes"
        out += chunk
    return out


async def test_writes_replicate_to_every_member(group3: GroupHarness) -> None:
    g = group3
    m = await g.wait_master()
    await g.wait_for(lambda: len(g.broker(m).replicas.master.view.members) == 3)  # type: ignore
    results = [await g.put(m, f"m{i}".encode()) for i in range(20)]
    assert all(r.status is PutStatus.PUT_OK for r in results)
    end = g.broker(m).context.store.commitlog_max_offset
    for i in range(3):
        await g.wait_for(lambda i=i: g.broker(i).context.store.commitlog_max_offset == end)
    data = commitlog_bytes(g, m, end)
    assert all(commitlog_bytes(g, i, end) == data for i in range(3))
