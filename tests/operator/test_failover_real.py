"""End to end on the real control plane: real controller, stand-in brokers, the operator
following the election."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mqcluster_operator import names
from mqcluster_testing.operator.failover import failover_scenario
from mqcluster_testing.operator.realplane.controlplane import Kube

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

BG = "brokergroups.v1alpha1.mqcluster.io"


async def test_operator_follows_a_real_failover(tmp_path: Path, kube_crds: Kube,
                                               kube_namespace: str) -> None:
    async with failover_scenario(tmp_path, kube_crds, kube_namespace) as sc:
        master, slave = await sc.group("broker-a", first_ip=20)
        try:
            seconds = await sc.failover_seconds("broker-a", master)
            assert sc.role("broker-a-0") == names.ROLE_SLAVE
            assert seconds < 30
            status = await sc.h.eventually(
                lambda: (s := (sc.h.obj(BG, "broker-a", sc.ns) or {}).get("status") or {})
                .get("masterPod") == "broker-a-1" and s, what="status.masterPod")
            assert status["masterEpoch"] >= 2
            assert status["activeController"] == sc.controllers.controller_addr
            events = await sc.h.eventually(
                lambda: [e for e in sc.h.events("MasterChanged", sc.ns)
                         if "to broker-a-1" in e["message"]], what="MasterChanged event")
            assert "from broker-a-0 to broker-a-1" in events[0]["message"]
        finally:
            await slave.close()


async def test_prestop_hands_the_master_role_over(tmp_path: Path, kube_crds: Kube,
                                                  kube_namespace: str) -> None:
    from mqcluster.broker.prestop import BrokerIdentity, hand_over

    async with failover_scenario(tmp_path, kube_crds, kube_namespace) as sc:
        master, slave = await sc.group("broker-b", first_ip=30)
        try:
            await sc.h.eventually(lambda: sc.role("broker-b-0") == "master", what="master")
            me = BrokerIdentity(
                "DefaultCluster", "broker-b", master.addr,
                tuple(sc.controllers.controller_addr.split(";")),
            )
            outcome = await hand_over(me, timeout=20)
            assert outcome == f"handed over to {slave.addr}"
            await sc.h.eventually(lambda: sc.role("broker-b-1") == "master",
                                  what="operator follows the hand-over")
            assert await hand_over(me, timeout=5) == "nothing to hand over"
        finally:
            await master.close()
            await slave.close()


async def test_operator_follows_failovers_in_many_groups(tmp_path: Path, kube_crds: Kube,
                                                        kube_namespace: str) -> None:
    """20 groups on one shared controller poll: 5 failovers one by one, then 15 at once."""
    groups = [f"group-{i:02d}" for i in range(20)]
    async with failover_scenario(tmp_path, kube_crds, kube_namespace) as sc:
        brokers = [await sc.group(name, first_ip=20 + 2 * i) for i, name in enumerate(groups)]
        try:
            await sc.h.eventually(
                lambda: all(sc.role(f"{g}-0") == names.ROLE_MASTER for g in groups),
                what="every group's first master")
            for name, (master, _) in zip(groups[:5], brokers[:5], strict=True):
                await master.close()
                await sc.h.eventually(lambda g=name: sc.role(f"{g}-1") == names.ROLE_MASTER,
                                      what=f"{name} failover followed")
            await asyncio.gather(*(master.close() for master, _ in brokers[5:]))
            await sc.h.eventually(
                lambda: all(sc.role(f"{g}-1") == names.ROLE_MASTER
                            and sc.role(f"{g}-0") == names.ROLE_SLAVE for g in groups),
                timeout=60, what="every group's failover followed")
            for g in groups:
                status = await sc.h.eventually(
                    lambda g=g: (s := (sc.h.obj(BG, g, sc.ns) or {}).get("status") or {})
                    .get("masterPod") == f"{g}-1" and s, what=f"{g} status.masterPod")
                assert status["masterEpoch"] >= 2
                conds = {c["type"]: c for c in status["conditions"]}
                assert conds["MasterElected"]["status"] == "True"
                assert {r["pod"] for r in status["replicas"]} == {f"{g}-0", f"{g}-1"}
            events = await sc.h.eventually(
                lambda: (e := [e for e in sc.h.events("MasterChanged", sc.ns)
                               if " to group-" in e["message"] and "-1 (epoch" in e["message"]])
                and len(e) >= len(groups) and e, timeout=30, what="a MasterChanged per group")
            for g in groups:
                assert any(f"from {g}-0 to {g}-1" in e["message"] for e in events), g
        finally:
            for _, slave in brokers:
                await slave.close()


async def test_operator_follows_a_sigkilled_master_process(
        tmp_path: Path, kube_crds: Kube, kube_namespace: str) -> None:
    """The master broker is its own process, killed with SIGKILL mid-heartbeat."""
    import json
    import subprocess
    import sys

    from mqcluster_testing import child_env
    from mqcluster_testing.controller.standin import StandInBroker
    from mqcluster_testing.operator.failover import CLUSTER

    async with failover_scenario(tmp_path, kube_crds, kube_namespace) as sc:
        name, ips = "broker-k", ["127.0.0.40", "127.0.0.41"]
        for i, ip in enumerate(ips):
            await sc.create_pod(name, i, ip)
        master = subprocess.Popen(
            [sys.executable, "-m", "mqcluster_testing.controller.standin",
             "--controllers", sc.controllers.controller_addr, "--cluster", CLUSTER,
             "--broker-name", name, "--store", str(tmp_path / name / "0"), "--host", ips[0],
             "--epoch", "1", "--heartbeat-interval", "0.3", "--heartbeat-timeout-ms", "1500"],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=child_env(),
        )  # fmt: skip
        slave = StandInBroker(sc.controllers.controller_addr, CLUSTER, name,
                              tmp_path / name / "1", host=ips[1], epoch=1,
                              heartbeat_interval=0.3, heartbeat_timeout_ms=1500)
        try:
            assert master.stdout is not None
            line = await asyncio.wait_for(asyncio.to_thread(master.stdout.readline), 30)
            registered = json.loads(line)
            assert registered["event"] == "registered"
            await slave.start()
            info = await slave.replica_info()
            await slave.client.alter_sync_state_set(
                name, registered["brokerId"], info.master_epoch,
                {registered["brokerId"], slave.broker_id}, info.sync_state_set_epoch,
            )
            await sc.h.api.create({
                "apiVersion": "mqcluster.io/v1alpha1", "kind": "BrokerGroup",
                "metadata": {"name": name, "namespace": sc.ns},
                "spec": {"mode": "Controller", "replicas": 2, "controllerRef": {"name": "mqc"}},
            })
            await sc.h.eventually(lambda: sc.role(f"{name}-0") == names.ROLE_MASTER,
                                  what="pod 0 labelled master")
            master.kill()
            master.wait()
            await sc.h.eventually(lambda: sc.role(f"{name}-1") == names.ROLE_MASTER,
                                  what="pod 1 labelled master after SIGKILL")
            assert sc.role(f"{name}-0") == names.ROLE_SLAVE
            events = await sc.h.eventually(
                lambda: [e for e in sc.h.events("MasterChanged", sc.ns)
                         if f"from {name}-0 to {name}-1" in e["message"]],
                what="MasterChanged event")
            assert events
        finally:
            if master.poll() is None:
                master.kill()
                master.wait()
            await slave.close()
