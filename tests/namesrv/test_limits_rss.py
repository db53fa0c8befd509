"""A real ``mqnamesrv`` under 1,000 connections each trying to pin 15 MiB of a 16 MiB
frame: its RSS grows by less than 50 MB and a normal client is served throughout."""

from __future__ import annotations

import asyncio

from mqcluster.client.namesrv import NamesrvClient
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.rpc import RpcClient
from mqcluster_testing.procs import Procs, procs  # noqa: F401
from tests.namesrv.helpers import start_namesrv
from tests.wire.pinning import MIB, assert_flood_handled, nested_header, pin_while_serving


async def test_pinning_connections_cost_under_50_mb_and_clients_are_served(
        procs: Procs) -> None:  # noqa: F811
    p, addr = await start_namesrv(procs)
    host, port = addr.rsplit(":", 1)
    client = NamesrvClient([addr])
    raw = RpcClient()
    try:
        async def probe() -> None:
            info = await client.get_cluster_info()
            assert info.clusterAddrTable == {}

        outcome = await pin_while_serving(p.pid, host, int(port), probe)
        print(outcome.describe())
        assert outcome.growth < 50 * MIB, outcome.describe()
        assert outcome.probes > 0
        assert outcome.attack.refused > 900  # past the budget: closed, not buffered
        assert outcome.attack.stalled == 0

        # A header nested 200,000 deep closes its own connection; no task fails.
        conn = await raw.connection(addr)
        conn.writer.write(nested_header(105))
        await asyncio.wait_for(conn.wait_closed(), 30)
        await probe()
        resp = await raw.invoke(addr, RemotingCommand.request(105))  # (a fresh connection)
        assert resp.opaque
    finally:
        await client.close()
        await raw.close()
    out = procs.output(p)
    assert_flood_handled(out)
