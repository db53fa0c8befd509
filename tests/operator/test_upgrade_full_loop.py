"""The whole loop of a rolling upgrade: kopf against the emulator, the StatefulSets run as
real processes by the local kubelet, a 3-replica controller-mode group upgraded by
changing ``spec.version`` while a producer runs (see ``upgrade_scenario``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .upgrade_scenario import report, running, upgrade_with_producer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


async def test_a_version_change_upgrades_the_group_slaves_first_without_losing_a_write(
        tmp_path: Path) -> None:
    async with running(tmp_path) as loop:
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
