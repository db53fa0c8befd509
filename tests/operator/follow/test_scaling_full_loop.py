"""The whole loop for scaling on the real control plane: kopf against the real API
server, a controller-mode group whose pods (the real StatefulSet controller's) the node
agent runs as real processes, scaled 3 -> 2 -> 3 with the master on the
removed ordinal and ``reclaimPolicy: Delete``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from mqcluster.admin import commands
from mqcluster.client.admin import AdminClient
from mqcluster_testing.operator.realplane.controlplane import Kube
from mqcluster_testing.operator.realplane.node_agent import NodeAgent

from .test_migration_full_loop import Loop, running_loop, send

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]



@pytest.fixture
async def loop(kube: Kube, node_agent: NodeAgent) -> AsyncIterator[Loop]:
    async with running_loop(kube, node_agent) as the_loop:
        yield the_loop


def condition(loop: Loop, kind: str) -> dict[str, Any]:
    return next((c for c in loop.status().get("conditions") or [] if c["type"] == kind), {})


def max_offset(loop: Loop, pod: str) -> int | None:
    return next((r.get("maxOffset") for r in loop.status().get("replicas") or []
                 if r["pod"] == pod), None)


async def test_scaling_3_to_2_to_3_moves_the_master_retires_the_replica_and_resyncs_it(
        loop: Loop) -> None:
    h = loop.h
    await loop.create_group("Controller", storage={"reclaimPolicy": "Delete"})
    await h.eventually(lambda: len(loop.status().get("syncStateSet") or []) == 3
                       and loop.status().get("masterPod"), timeout=90,
                       what=lambda: f"a full SyncStateSet; status {loop.status()}")
    # The master on the ordinal a scale-down removes.
    if loop.status()["masterPod"] != "bg-2":
        await h.api.patch(loop.bg, {"metadata": {"annotations": {"mqcluster.io/switchover-to":
                                                            "bg-2"}}})
        await h.eventually(lambda: loop.status().get("masterPod") == "bg-2", timeout=60,
                           what=lambda: f"bg-2 master; status {loop.status()}")
    addr = loop.master_addr()
    async with AdminClient(broker_addr=addr) as admin:
        await admin.create_topic("ScaleTopic", 2, broker_addr=addr)
    await send(loop.namesrv, [f"s{i}" for i in range(20)], "ScaleTopic")
    await h.eventually(lambda: "bg-2" in loop.kubelet.running and h.obj(
        "v1/persistentvolumeclaims", "data-bg-2", loop.ns), what="bg-2's claim")

    await h.api.patch(loop.bg, {"spec": {"replicas": 2}})
    # The record moves on (a later catch-up replaces it); the events stay.
    messages = await h.eventually(lambda: [e["message"] for e in h.events("Scaling", loop.ns)
                                           if "scaled down to 2" in e["message"]]
                                  and [e["message"] for e in h.events("Scaling", loop.ns)],
                                  timeout=120, what=lambda: f"scaled down; {loop.status()}")
    assert any("switching the master over" in m for m in messages)
    assert loop.status()["masterPod"] in ("bg-0", "bg-1")
    assert "bg-2" not in loop.kubelet.running
    assert h.obj("v1/persistentvolumeclaims", "data-bg-2", loop.ns) is None  # reclaimPolicy Delete
    info = await commands._cluster_info(loop.namesrv)
    registered = info.brokerAddrTable["bg"].brokerAddrs.values()
    assert not any(a.startswith(loop.kubelet.ip_of("bg-2") + ":") for a in registered)
    await h.eventually(lambda: sorted(loop.status().get("syncStateSet") or [])
                       == ["bg-0", "bg-1"], timeout=60,
                       what=lambda: f"bg-2 out of the SyncStateSet; status {loop.status()}")

    await h.api.patch(loop.bg, {"spec": {"replicas": 3}})
    await h.eventually(lambda: len(loop.status().get("syncStateSet") or []) == 3
                       and max_offset(loop, "bg-2") is not None
                       and max_offset(loop, "bg-2") == max_offset(loop, loop.status()["masterPod"])
                       and condition(loop, "Scaling").get("reason") == "Completed",
                       timeout=180, what=lambda: f"bg-2 back in sync; status {loop.status()}")
    assert loop.kubelet.started.count("bg-2") >= 2
