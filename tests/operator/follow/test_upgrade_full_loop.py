"""The whole loop of a rolling upgrade on the real control plane: kopf against the real
API server, the real StatefulSet controller's pods (OnDelete, revisions) run as real
processes by the node agent, a 3-replica controller-mode group upgraded by
changing ``spec.version`` while a producer runs (see ``upgrade_scenario``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqcluster_testing.operator.realplane.controlplane import Kube
from mqcluster_testing.operator.realplane.node_agent import NodeAgent
from mqcluster_testing.operator.upgrade_scenario import (
    create_group,
    report,
    running,
    set_version,
    upgrade_with_producer,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


async def test_a_version_change_upgrades_the_group_slaves_first_without_losing_a_write(
        tmp_path: Path, kube: Kube, node_agent: NodeAgent) -> None:
    async with running(tmp_path, kube, node_agent) as loop:
        run = await upgrade_with_producer(loop)
    print(report(run))
    old_master = run.masters[0]
    # every pod once: the two slaves, one at a time, then the old master after a switchover
    assert sorted(run.started) == ["bg-0", "bg-1", "bg-2"]
    assert run.started[-1] == old_master
    assert len(run.masters) >= 2 and run.masters[-1] != old_master
    assert any(s == "True" and "pods upgraded" in m for s, _, m in run.upgrading)
    assert run.upgrading[-1][:2] == ("False", "UpToDate")
    assert {"0/3 pods upgraded", "1/3 pods upgraded", "2/3 pods upgraded"} <= set(run.progress)
    assert "Upgrading" in run.phases
    assert any("started" in e for e in run.events)
    assert any("switching the master over to" in e for e in run.events)
    assert any("completed: 3/3 pods upgraded" in e for e in run.events)
    assert len(run.acked) > 20
    assert run.lost == []


async def test_a_broken_image_stops_the_roll_and_the_fixed_one_replaces_the_stuck_pod_first(
        tmp_path: Path, kube: Kube, node_agent: NodeAgent) -> None:
    async with running(tmp_path, kube, node_agent) as loop:
        await create_group(loop)
        master = loop.status()["masterPod"]
        loop.kubelet.broken_images.add("mqcluster/broker:broken")
        before = len(loop.kubelet.started)
        await set_version(loop, "broken")
        await loop.h.eventually(lambda: loop.kubelet.stuck, timeout=60, what=loop.describe)
        [stuck] = loop.kubelet.stuck
        assert stuck != master
        await loop.h.eventually(
            lambda: (c := loop.upgrading()) and c[1] == "Waiting" and stuck in c[2],
            what=loop.describe)
        # the other pods keep running the old version, the master is unchanged
        assert len(loop.kubelet.running) == 3 and loop.status()["masterPod"] == master
        assert set(loop.kubelet.running) == {"mqc-0", "bg-0", "bg-1", "bg-2"} - {stuck}

        await set_version(loop, "0.3.0")
        await loop.h.eventually(
            lambda: (c := loop.upgrading()) and c[:2] == ("False", "UpToDate"),
            timeout=180, what=loop.describe)
        started = loop.kubelet.started[before:]
        events = [e["message"] for e in loop.h.events("Upgrade", loop.ns)]
    assert started[0] == stuck and sorted(started) == ["bg-0", "bg-1", "bg-2"]
    assert started[-1] == master
    assert any(f"replacing {stuck}, which cannot serve (ImagePullBackOff)" in e for e in events)


async def test_a_dledger_group_hands_leadership_over_before_its_leader_restarts(
        tmp_path: Path, kube: Kube, node_agent: NodeAgent) -> None:
    async with running(tmp_path, kube, node_agent) as loop:
        run = await upgrade_with_producer(loop, "DLedger")
    print(report(run))
    old_leader = run.masters[0]
    assert sorted(run.started) == ["bg-0", "bg-1", "bg-2"]
    # The pod restarted last does not lead at the end: a leader hands over first.
    assert run.masters[-1] != run.started[-1]
    # The leader hands over to an upgraded follower before its restart, unless another
    # member has already won an election by then (a restarted member campaigns at once):
    # then the old leader is restarted as the follower it has become, and whoever leads
    # at the end of the roll hands over in its turn.
    transferred = any("transferring leadership to" in e for e in run.events)
    as_follower = any(c[1] == "RestartingSlave" and f"restarting {old_leader} " in c[2]
                      for c in run.upgrading)
    assert run.started[-1] == old_leader or as_follower, (run.started, run.masters,
                                                           run.upgrading)
    assert transferred or as_follower, run.upgrading
    assert run.upgrading[-1][:2] == ("False", "UpToDate")
    assert run.lost == []
