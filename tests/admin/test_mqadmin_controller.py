"""mqadmin's controller commands against a controller embedded in a name server.

The first tests run the name server and its embedded ControllerService in this
process (single-node consensus injected) and mqadmin as a subprocess; the last
ones run real ``mqnamesrv``/``mqcontroller`` processes once the Raft-backed
controller is available.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mqcluster.admin.main import build_parser
from mqcluster.client.controller import ControllerClient, ControllerError
from mqcluster.client.namesrv import NamesrvClient
from mqcluster.controller.consensus import LocalConsensus
from mqcluster.namesrv.config import NamesrvConfig
from mqcluster.namesrv.embedded import EmbeddedController, build_embedded_controller
from mqcluster.namesrv.server import NamesrvServer
from mqcluster.protocol.controller import BrokerHeartbeatRequestHeader
from mqcluster.protocol.namesrv import BrokerRegistration
from mqcluster_testing.procs import Procs, free_addr, procs  # noqa: F401
from tests.namesrv.helpers import mqadmin, start_namesrv, wait_for_output

CLUSTER = "DefaultCluster"
GROUP = "broker-a"


@dataclass
class Embedded:
    namesrv: NamesrvServer
    controller: EmbeddedController
    client: ControllerClient

    @property
    def addr(self) -> str:
        return self.namesrv.address


@pytest.fixture
async def embedded(tmp_path: Path) -> AsyncIterator[Embedded]:
    host = free_addr().rsplit(":", 1)[0]
    srv = NamesrvServer(NamesrvConfig(listenPort=0, bindAddress=host))
    props = {
        "enableControllerInNamesrv": "true",
        "controllerDLegerGroup": "group1",
        "controllerDLegerPeers": f"n0-{free_addr(host)}",
        "controllerDLegerSelfId": "n0",
        "controllerStorePath": str(tmp_path / "controller"),
        "listenPort": "0",
    }
    ctl = build_embedded_controller(
        props, srv.registry, srv.routes, consensus_factory=lambda sm, _r: LocalConsensus("n0", sm)
    )
    await srv.start()
    await ctl.start()
    client = ControllerClient([srv.address])
    try:
        yield Embedded(srv, ctl, client)
    finally:
        await client.close()
        await ctl.stop()
        await srv.stop()


async def two_replicas(client: ControllerClient) -> dict[int, str]:
    """Register replicas 1 and 2 of broker-a, elect 1, put both in the SyncStateSet."""
    addrs = {}
    for bid in (1, 2):
        addr = f"127.0.0.1:{10900 + bid}"
        await client.heartbeat(
            BrokerHeartbeatRequestHeader(
                cluster_name=CLUSTER, broker_addr=addr, broker_name=GROUP, broker_id=bid,
                heartbeat_timeout_mills=600_000)
        )
        nid = await client.get_next_broker_id(CLUSTER, GROUP)
        await client.apply_broker_id(CLUSTER, GROUP, nid, f"{addr};check{nid}")
        await client.register_broker(CLUSTER, GROUP, nid, addr)
        addrs[nid] = addr
    header, _ = await client.elect_master(CLUSTER, GROUP, 1)
    assert header.master_broker_id == 1
    await client.alter_sync_state_set(GROUP, 1, header.master_epoch or 0, {1, 2}, 1)
    return addrs


async def test_get_controller_metadata(embedded: Embedded) -> None:
    rc, out, err = await mqadmin("getControllerMetaData", "-a", embedded.addr)
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["#ControllerGroup", "group1"]
    assert lines[1].split() == ["#ControllerLeaderId", "n0"]
    rc, out, _ = await mqadmin("getControllerMetaData", "-a", embedded.addr, "--json")
    data = json.loads(out)
    assert data["controllerLeaderId"] == "n0" and data["isLeader"] is True
    assert data["peers"][0]["id"] == "n0"


async def test_sync_state_set_and_elect_master(embedded: Embedded) -> None:
    addrs = await two_replicas(embedded.client)
    rc, out, err = await mqadmin("getSyncStateSet", "-a", embedded.addr, "-b", GROUP)
    assert rc == 0, err
    assert f"#MasterAddr         {addrs[1]}" in out
    assert "#SyncStateShowNums  2" in out
    rc, out, _ = await mqadmin("getSyncStateSet", "-a", embedded.addr, "-b", GROUP, "--json")
    data = json.loads(out)[GROUP]
    assert data["masterBrokerId"] == 1
    assert sorted(r["brokerId"] for r in data["inSyncReplicas"]) == [1, 2]

    rc, out, err = await mqadmin(
        "electMaster", "-a", embedded.addr, "-c", CLUSTER, "-bn", GROUP, "-b", "2", "--json"
    )
    assert rc == 0, err
    elected = json.loads(out)
    assert elected["masterBrokerId"] == 2 and elected["masterAddress"] == addrs[2]
    info = await embedded.client.get_replica_info(GROUP)
    assert info.master_broker_id == 2 and info.master_epoch == 2


async def test_controller_error_paths(embedded: Embedded) -> None:
    await two_replicas(embedded.client)
    rc, _, err = await mqadmin("getSyncStateSet", "-a", embedded.addr, "-b", "nope")
    assert rc == 1 and err.strip() == (
        "mqadmin getSyncStateSet: broker group 'nope' is not known to the controller"
    )
    rc, _, err = await mqadmin(
        "electMaster", "-a", embedded.addr, "-c", CLUSTER, "-bn", GROUP, "-b", "1"
    )
    assert rc == 1 and len(err.strip().splitlines()) == 1
    assert "CONTROLLER_MASTER_STILL_EXIST" in err
    rc, _, err = await mqadmin("getSyncStateSet", "-a", embedded.addr, "-c", CLUSTER)
    assert rc == 1 and "give -n" in err


async def test_sync_state_set_by_cluster_uses_the_name_server(embedded: Embedded) -> None:
    addrs = await two_replicas(embedded.client)
    async with NamesrvClient([embedded.addr]) as ns:
        await ns.register_broker(
            BrokerRegistration(
                clusterName=CLUSTER, brokerName=GROUP, brokerAddr=addrs[1], brokerId=0
            )
        )
        rc, out, err = await mqadmin(
            "getSyncStateSet", "-a", embedded.addr, "-c", CLUSTER, "-n", embedded.addr, "--json"
        )
    assert rc == 0, err
    assert list(json.loads(out)) == [GROUP]


async def test_real_mqnamesrv_with_embedded_controller(procs: Procs, tmp_path: Path) -> None:  # noqa: F811
    pytest.importorskip("mqcluster.controller.raft_consensus")
    host = free_addr().rsplit(":", 1)[0]
    conf = tmp_path / "namesrv.conf"
    conf.write_text(
        "enableControllerInNamesrv=true\n"
        "controllerDLegerGroup=group1\n"
        f"controllerDLegerPeers=n0-{free_addr(host)}\n"
        "controllerDLegerSelfId=n0\n"
        f"controllerStorePath={tmp_path / 'controller'}\n"
    )
    _, ns = await start_namesrv(procs, conf=conf)
    rc, out, err = await _until_leader(ns)
    assert rc == 0, err
    assert json.loads(out)["controllerLeaderId"] == "n0"
    rc, _, err = await mqadmin("getSyncStateSet", "-a", ns, "-b", "nope")
    assert rc == 1 and "not known to the controller" in err


async def test_real_mqcontroller(procs: Procs, tmp_path: Path) -> None:  # noqa: F811
    pytest.importorskip("mqcluster.controller.main")
    pytest.importorskip("mqcluster.controller.raft_consensus")
    addr = free_addr()
    conf = tmp_path / "controller.conf"
    conf.write_text(
        "controllerDLegerGroup=group1\n"
        f"controllerDLegerPeers=n0-{addr}\n"
        "controllerDLegerSelfId=n0\n"
        f"controllerStorePath={tmp_path / 'controller'}\n"
    )
    p = procs.python("-m", "mqcluster.controller.main", "-c", str(conf), name="mqcontroller")
    await wait_for_output(procs, p, "serving on")
    rc, out, err = await _until_leader(addr)
    assert rc == 0, err
    assert json.loads(out)["controllerLeaderAddress"] == addr
    rc, _, err = await mqadmin("getSyncStateSet", "-a", addr, "-b", "nope")
    assert rc == 1 and "not known to the controller" in err


async def _until_leader(addr: str, timeout: float = 30.0) -> tuple[int, str, str]:
    """getControllerMetaData once a leader is known (a fresh Raft group elects first)."""
    client = ControllerClient([addr], retry_timeout=timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                await client.find_active()
                break
            except ControllerError:
                await asyncio.sleep(0.1)
    finally:
        await client.close()
    return await mqadmin("getControllerMetaData", "-a", addr, "--json")


def test_elect_master_takes_rocketmqs_flags_and_names_a_misused_one() -> None:
    parser = build_parser()
    args = parser.parse_args(["electMaster", "-a", "127.0.0.1:9878", "-c", "DefaultCluster",
                              "-bn", "broker-a", "-b", "2"])
    assert (args.brokerName, args.brokerId) == ("broker-a", 2)
    with pytest.raises(SystemExit):
        parser.parse_args(["electMaster", "-a", "x:1", "-c", "c", "-b", "broker-a", "-i", "1"])
