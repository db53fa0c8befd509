"""``mqproxy`` in front of real groups, with the official client connected to it.

The point of the proxy: the client's own connection is never to the master process,
so a master that hangs (SIGSTOP) cannot hold the client; sends go on through the new
master while the old one is still stopped.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mqcluster_testing.broker.procs import ProxyProc, start_proxy
from mqcluster_testing.ha.cluster import GROUP, ProcessGroup
from mqcluster_testing.ha.dledger_cluster import DLedgerProcessGroup
from tests.ha.test_processes import History, check_consistency, produce, wait_acks

pytestmark = pytest.mark.slow


@pytest.fixture
async def group(tmp_path: Path) -> AsyncIterator[tuple[ProcessGroup, ProxyProc]]:
    g = ProcessGroup(tmp_path)
    proxy: ProxyProc | None = None
    try:
        await g.start()
        await g.wait_sync_state_set(3)
        proxy = await start_proxy(tmp_path, GROUP, controllerAddr=g.controllers.controller_addr)
        yield g, proxy
    except BaseException:
        print(g.logs())
        raise
    finally:
        if proxy is not None:
            await proxy.kill()
        await g.close()


async def test_sends_go_on_while_the_master_is_still_hung(
        group: tuple[ProcessGroup, ProxyProc]) -> None:
    g, proxy = group
    history = History()
    worker = threading.Thread(target=produce, args=(proxy.addr, history), daemon=True)
    worker.start()
    try:
        await wait_acks(history, 20)
        m = await g.wait_master()
        g.hang(m)
        await g.wait_master(not_index=m)
        # Not woken: the client must get acks from the new master through the proxy.
        await wait_acks(history, len(history.acked) + 20, timeout=30)
        g.wake(m)
        k = await g.wait_master()
        await g.wait_sync_state_set(3)
        await g.kill(k)
        await g.wait_master(not_index=k)
        await wait_acks(history, len(history.acked) + 20, timeout=30)
        await g.restart(k)
    finally:
        history.stop.set()
        await asyncio.to_thread(worker.join, 30)
    await check_consistency(g, history)
    print(f"longest gap between acks through the proxy: {history.longest_gap():.2f} s")


async def test_a_dledger_group_behind_a_proxy_follows_the_name_server(tmp_path: Path) -> None:
    g = DLedgerProcessGroup(tmp_path)
    proxy: ProxyProc | None = None
    history = History()
    worker = threading.Thread(target=lambda: produce(proxy.addr if proxy else "", history),
                              daemon=True)
    try:
        await g.start()
        leader = await g.wait_leader()
        assert g.namesrv is not None
        proxy = await start_proxy(tmp_path, "dledger-a", namesrvAddr=g.namesrv.addr)
        worker.start()
        await wait_acks(history, 20)
        g.hang(leader)
        await g.wait_leader(not_index=leader)
        await wait_acks(history, len(history.acked) + 20, timeout=30)
        g.wake(leader)
    except BaseException:
        print(g.logs())
        raise
    finally:
        history.stop.set()
        if worker.is_alive():
            await asyncio.to_thread(worker.join, 30)
        if proxy is not None:
            await proxy.kill()
        await g.close()
    print(f"longest gap between acks through the proxy: {history.longest_gap():.2f} s")
