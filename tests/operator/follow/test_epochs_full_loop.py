"""The whole loop for epoch files on the real control plane: kopf against the real API
server, a controller-mode group whose pods the node agent runs as real processes; one
replica's epoch file is forged while its pod is stopped, the operator reports
``Degraded, reason=EpochConflict`` naming it,
and an approved wipe brings the replica back into the SyncStateSet."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from mqcluster.client.admin import AdminClient
from mqcluster.protocol.epochs import EpochEntry, encode
from mqcluster_testing.operator.realplane.controlplane import Kube
from mqcluster_testing.operator.realplane.node_agent import NodeAgent

from .test_migration_full_loop import Loop, running_loop, send

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

BG = "brokergroups.v1alpha1.mqcluster.io"


@pytest.fixture
async def loop(kube: Kube, node_agent: NodeAgent) -> AsyncIterator[Loop]:
    async with running_loop(kube, node_agent) as the_loop:
        yield the_loop


def degraded(loop: Loop) -> dict[str, Any]:
    return next((c for c in loop.status().get("conditions") or []
                 if c["type"] == "Degraded"), {})


def epochs_of(loop: Loop, pod: str) -> list[dict[str, Any]]:
    return next((r.get("epochs") or [] for r in loop.status().get("replicas") or []
                 if r["pod"] == pod), [])


async def test_a_replica_with_a_foreign_epoch_history_is_reported_then_wiped_on_approval(
        loop: Loop) -> None:
    h = loop.h
    await loop.create_group("Controller")
    await h.eventually(lambda: len(loop.status().get("syncStateSet") or []) == 3
                       and loop.status().get("masterPod"), timeout=90,
                       what=lambda: f"a full SyncStateSet; status {loop.status()}")
    master = loop.status()["masterPod"]
    victim = next(p for p in ("bg-0", "bg-1", "bg-2") if p != master)
    addr = loop.master_addr()
    async with AdminClient(broker_addr=addr) as admin:
        await admin.create_topic("EpochTopic", 2, broker_addr=addr)
    await send(loop.namesrv, [f"e{i}" for i in range(20)], "EpochTopic")
    await h.eventually(lambda: epochs_of(loop, victim) and epochs_of(loop, master)
                       and degraded(loop).get("status") == "False",
                       what=lambda: f"epochs in status; status {loop.status()}")
    assert epochs_of(loop, victim)[0]["epoch"] == epochs_of(loop, master)[0]["epoch"]

    # The victim's store comes back with a history from another life of the group.
    root = await loop.kubelet.hold(victim)
    (root / "epochFileCheckpoint.bak").unlink(missing_ok=True)
    (root / "epochFileCheckpoint").write_bytes(encode([EpochEntry(77, 0)]))
    starts = loop.kubelet.started.count(victim)
    loop.kubelet.release(victim)

    # Condition, status field and event are written one after the other.
    await h.eventually(lambda: degraded(loop).get("reason") == "EpochConflict"
                       and loop.status().get("epochConflicts")
                       and h.events("EpochConflict", loop.ns),
                       timeout=60, what=lambda: f"EpochConflict; status {loop.status()}")
    assert victim in degraded(loop)["message"]
    assert loop.status()["epochConflicts"] == [victim]
    warnings = [e["message"] for e in h.events("EpochConflict", loop.ns) if e["type"] == "Warning"]
    assert any(m.startswith(f"{victim} shares no epoch") for m in warnings)
    # The broker stays up and waits for a decision instead of crash-looping.
    assert loop.kubelet.started.count(victim) == starts + 1 and victim in loop.kubelet.running

    await h.api.patch(loop.bg,
                      {"metadata": {"annotations": {"mqcluster.io/wipe-replica": victim}}})
    await h.eventually(lambda: degraded(loop).get("status") == "False"
                       and not loop.status().get("epochConflicts")
                       and len(loop.status().get("syncStateSet") or []) == 3
                       and epochs_of(loop, victim)
                       and epochs_of(loop, victim)[0]["epoch"] != 77, timeout=90,
                       what=lambda: f"the wiped replica back in sync; status {loop.status()}")
    annotations = (h.obj(BG, "bg", loop.ns) or {})["metadata"].get("annotations") or {}
    assert "mqcluster.io/wipe-replica" not in annotations
    assert loop.kubelet.started.count(victim) == starts + 2

