"""A real ``mqbroker`` under 1,000 connections each trying to pin 15 MiB of a 16 MiB
frame: its RSS grows by less than 50 MB and a producer's sends are stored throughout."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from mqcluster.client import AdminClient, Message, Producer
from mqcluster.wire.rpc import RpcClient
from mqcluster_testing.procs import Procs, free_addr, procs  # noqa: F401
from tests.broker.test_broker_cluster import assert_routed
from tests.namesrv.helpers import start_namesrv, wait_for_output
from tests.wire.pinning import MIB, assert_flood_handled, nested_header, pin_while_serving


async def test_pinning_connections_cost_under_50_mb_and_sends_are_stored(
        procs: Procs, tmp_path: Path) -> None:  # noqa: F811
    _, namesrv = await start_namesrv(procs)
    addr = free_addr()
    host, port = addr.rsplit(":", 1)
    props = {
        "brokerClusterName": "LimitCluster", "brokerName": "broker-limits",
        "brokerIP1": host, "bindAddress": host, "listenPort": port,
        "haListenPort": free_addr(host).rsplit(":", 1)[1],
        "metricsPromExporterPort": free_addr(host).rsplit(":", 1)[1],
        "storePathRootDir": str(tmp_path / "store"),
        "mappedFileSizeCommitLog": str(64 * MIB), "enableProxy": "false",
        "namesrvAddr": namesrv, "registerNameServerPeriod": "1000",
    }
    conf = tmp_path / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    broker = procs.spawn([sys.executable, "-m", "mqcluster.broker.main", "-c", str(conf)],
                         name="broker")
    await wait_for_output(procs, broker, "boot success", timeout=60)
    async with AdminClient(namesrv_addr=namesrv) as admin:
        await admin.create_topic("Pinned", queue_nums=1)
    await assert_routed(namesrv, "Pinned")
    raw = RpcClient()
    sent: list[int] = []
    try:
        async with Producer("limits", namesrv_addr=namesrv, retries=0) as producer:
            async def probe() -> None:
                result = await producer.send(Message("Pinned", b"during the flood"))
                sent.append(result.queue_offset)

            outcome = await pin_while_serving(broker.pid, host, int(port), probe)
        print(outcome.describe())
        assert outcome.growth < 50 * MIB, outcome.describe()
        assert outcome.attack.refused > 900 and outcome.attack.stalled == 0
        assert outcome.probes > 0 and sent == list(range(len(sent)))  # each one stored

        conn = await raw.connection(addr)
        conn.writer.write(nested_header(310))
        await asyncio.wait_for(conn.wait_closed(), 30)
    finally:
        await raw.close()
    out = procs.output(broker)
    assert_flood_handled(out)
