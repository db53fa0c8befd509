"""Ready, the upgrade's end and DLedger election following on the real control plane: the
real StatefulSet controller makes the pods, the node agent runs them, the operator (the
production handlers) follows them.

The resync and the brokers' health poll are set far beyond every wait here: Ready turning
True or False, and a DLedger leader change reaching the labels and status, can only come
from the watches of the pods (readiness.py). The delays measured are printed (``-s``),
not asserted.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from typing import Any

import aiohttp
import pytest

# The real control plane's test support (tests/operator/realplane: fixtures, node agent).
pytest.importorskip("mqcluster_testing.operator.realplane.controlplane",
                    reason="tests/operator/realplane is not in this checkout")
from mqcluster_operator import names
from mqcluster_operator.follow.election_plan import MASTER_ROLES
from mqcluster_operator.k8s import Ref
from mqcluster_operator.models import BrokerGroupSpec
from mqcluster_operator.names import API_VERSION
from mqcluster_testing.operator.real_operator import (
    BG,
    MQC,
    PODS,
    OperatorRun,
    condition,
    operator_on,
    pod_ready,
)
from mqcluster_testing.operator.realplane.controlplane import Kube, KubeApi
from mqcluster_testing.operator.realplane.node_agent import NodeAgent

pytestmark = [pytest.mark.timeout(300)]
NEVER = 3600.0  # a resync or health poll that never comes within a test


def controller(ns: str, replicas: int = 1) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "Controller",
            "metadata": {"name": "namesrv", "namespace": ns},
            "spec": {"replicas": replicas, "deployment": "EmbeddedInNamesrv"}}


def group(ns: str, name: str = "broker-a", **spec: Any) -> dict[str, Any]:
    body = {"mode": "Controller", "replicas": 3, "controllerRef": {"name": "namesrv"},
            "minInSyncReplicas": 1}
    body.update(spec)
    return {"apiVersion": API_VERSION, "kind": "BrokerGroup",
            "metadata": {"name": name, "namespace": ns}, "spec": body}


def ready_of(run: OperatorRun, plural: str, name: str) -> str | None:
    return (condition(run.obj(plural, name), "Ready") or {}).get("status")


def all_pods_ready(run: OperatorRun, name: str, replicas: int) -> bool:
    return all(pod_ready(run.obj(PODS, f"{name}-{i}")) for i in range(replicas))


async def test_ready_follows_the_pods_and_a_killed_replica(
        kube: Kube, kube_api: KubeApi, node_agent: NodeAgent) -> None:
    ns = node_agent.namespace
    async with operator_on(kube, node_agent, reconcile_interval=NEVER) as run:
        await kube_api.create(controller(ns))
        await kube_api.create(group(ns))
        await run.eventually(lambda: ready_of(run, BG, "broker-a") == "True", "Ready=True")
        last_pod = max(run.timeline.first("ready", f"broker-a-{i}", True) or 0 for i in range(3))
        ready_at = run.timeline.first("Ready", "broker-a", "True")
        assert ready_at is not None and last_pod > 0
        assert all_pods_ready(run, "broker-a", 3)
        status = run.status(BG, "broker-a")
        assert (status["phase"], status["readyReplicas"]) == ("Running", 3)
        await run.eventually(lambda: ready_of(run, MQC, "namesrv") == "True",
                             "Controller Ready=True")
        print(f"\nBrokerGroup Ready=True {ready_at - last_pod:.3f} s after its last pod")

        master = str(status["masterPod"])
        slave = next(f"broker-a-{i}" for i in range(3) if f"broker-a-{i}" != master)
        killed = time.monotonic()
        await node_agent.kill(slave)
        await run.eventually(lambda: ready_of(run, BG, "broker-a") == "False",
                             "Ready=False while a replica is NotReady")
        cond = condition(run.obj(BG, "broker-a"), "Ready") or {}
        assert cond["reason"] == "ReplicasNotReady" and slave in cond["message"]
        assert run.status(BG, "broker-a")["phase"] == "Degraded"
        down_at = run.timeline.first("Ready", "broker-a", "False", after=killed)
        not_ready_at = run.timeline.first("ready", slave, False, after=killed)
        await run.eventually(lambda: ready_of(run, BG, "broker-a") == "True",
                             "Ready=True once the restarted replica is Ready")
        if down_at and not_ready_at:
            print(f"Ready=False {down_at - not_ready_at:.3f} s after {slave} turned NotReady")


async def test_a_dledger_leader_change_follows_the_killed_leaders_pod(
        kube: Kube, kube_api: KubeApi, node_agent: NodeAgent) -> None:
    ns = node_agent.namespace
    async with operator_on(kube, node_agent, follow_interval=NEVER,
                           reconcile_interval=NEVER) as run:
        await kube_api.create(controller(ns))
        await kube_api.create(group(ns, "broker-d", mode="DLedger", controllerRef=None,
                                    namesrvAddr=f"namesrv-0.namesrv-headless.{ns}.svc:9876"))
        # the first election is read when the pods turn Ready (the health poll never runs)
        first = await run.eventually(
            lambda: run.status(BG, "broker-d").get("masterPod"), "a leader in status")
        delays: list[tuple[float, float]] = []
        for _ in range(3):
            old = run.status(BG, "broker-d")["masterPod"]
            await run.eventually(lambda: ready_of(run, BG, "broker-d") == "True",
                                 "the group Ready (every pod Ready, a leader)")
            killed = time.monotonic()
            await node_agent.kill(old)
            watcher = asyncio.create_task(elected(node_agent, "broker-d", old))
            new = await run.eventually(
                lambda o=old: (m := run.status(BG, "broker-d").get("masterPod")) not in (None, o)
                and run.role(m) == "master" and run.role(o) != "master" and m,
                "the new leader in status and labels")
            leader, elected_at = await watcher
            assert leader == new
            in_status = run.timeline.first("masterPod", "broker-d", new, after=killed)
            assert in_status is not None
            delays.append((elected_at - killed, in_status - elected_at))
        assert first
        print(f"\nDLedger (kill to election, election to status.masterPod) s: "
              f"{[(round(a, 2), round(b, 2)) for a, b in delays]}; election to status median"
              f" {statistics.median(b for _, b in delays):.2f} s")


async def elected(agent: NodeAgent, name: str, old: str) -> tuple[str, float]:
    """The first pod other than ``old`` whose /health says it is the master, and when."""
    spec = BrokerGroupSpec.model_validate({"mode": "DLedger", "replicas": 3, "namesrvAddr": "n:1"})
    urls = {f"{name}-{i}": agent.resolve(f"http://{names.pod_dns(name, i, agent.namespace)}:"
                                         f"{spec.ports.metrics}/health")
            for i in range(3) if f"{name}-{i}" != old}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=0.5)) as session:
        for _ in range(3000):
            for pod, url in urls.items():
                with contextlib.suppress(aiohttp.ClientError, TimeoutError, ValueError):
                    async with session.get(url) as resp:
                        if (await resp.json()).get("brokerRole") in MASTER_ROLES:
                            return pod, time.monotonic()
            await asyncio.sleep(0.01)
    raise AssertionError("no new leader")


async def test_an_upgrade_is_finished_only_once_every_new_pod_is_ready(
        kube: Kube, kube_api: KubeApi, node_agent: NodeAgent) -> None:
    ns = node_agent.namespace
    async with operator_on(kube, node_agent) as run:
        await kube_api.create(controller(ns))
        await kube_api.create(group(ns))
        await run.eventually(lambda: ready_of(run, BG, "broker-a") == "True", "Ready=True")
        revision = (run.obj("apps/v1/statefulsets", "broker-a") or {})["status"]["updateRevision"]
        await kube_api.patch(Ref(API_VERSION, "BrokerGroup", ns, "broker-a"),
                             {"spec": {"brokerConfig": {"flushDiskType": "SYNC_FLUSH"}}})
        started = time.monotonic()
        await run.eventually(
            lambda: (c := condition(run.obj(BG, "broker-a"), "Upgrading"))
            and (c["status"], c["reason"]) == ("False", "UpToDate"), "the roll finished",
            timeout=240)
        done = run.timeline.first("Upgrading", "broker-a", ("False", "UpToDate"), after=started)
        assert done is not None
        sts = run.obj("apps/v1/statefulsets", "broker-a") or {}
        assert sts["status"]["updateRevision"] != revision
        for i in range(3):
            pod = f"broker-a-{i}"
            became_ready = run.timeline.last("ready", pod, True, before=done)
            lost_ready = run.timeline.last("ready", pod, False, before=done)
            # Ready at the moment the roll was reported finished
            assert became_ready is not None and (lost_ready is None or lost_ready < became_ready)
        print(f"\nroll finished {time.monotonic() - started:.1f} s after the change")
