"""The reduced chaos run of CI: both replication modes in network namespaces, every
fault kind and the mode's overlapping pairs of faults at least once, each having taken
effect, and the verdict: nothing acknowledged lost, nothing stored twice by the brokers
beyond the client's own attempts, FIFO order kept, replicas identical."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from chaos.faults import OVERLAPS, POWER_FAULTS, faults_for
from chaos.lazymount import fuse_unavailable
from chaos.runner import run_scenario

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("netns")]

SEED = int(os.environ.get("CHAOS_SEED") or secrets.randbelow(1_000_000))


@pytest.mark.parametrize(("mode", "duration"), [("controller", 20.0), ("dledger", 20.0)])
async def test_short_chaos_schedule(mode: str, duration: float, tmp_path: Path) -> None:
    print(f"chaos seed {SEED} (CHAOS_SEED={SEED} reproduces it)")
    result = await run_scenario(mode, duration, SEED, tmp_path, overlaps=True)
    assert result.error is None, result.error
    v = result.verdict
    assert v is not None
    kinds = {f.name for f in faults_for(mode, overlaps=True)}
    assert kinds & {f.name for f in OVERLAPS}, "at least one overlapping pair"
    assert kinds & POWER_FAULTS, "a power loss, alone and during a partition"
    if fuse_unavailable() is not None:
        kinds -= POWER_FAULTS
    assert set(result.faults) == kinds, (f"took effect: {dict(result.faults)}; without "
                                         f"effect: {dict(result.no_effect)} (seed {SEED})")
    assert v.acknowledged > 100
    assert v.lost == [], f"acknowledged but lost (seed {SEED})"
    assert v.duplicated == [], f"stored twice by the brokers (seed {SEED})"
    assert v.reordered == [], f"FIFO order broken (seed {SEED})"
    assert v.replicas_identical, v.replicas_detail
    assert v.unreadable == []
    assert v.unconsumed == [], "acknowledged but never delivered to the consumer"
    print(f"{mode}: {sum(result.faults.values())} faults took effect, "
          f"{sum(result.no_effect.values())} did not, {v.acknowledged} acknowledged, "
          f"{len(v.retried)} client retries stored twice, longest gap "
          f"{v.max_unavailable_ms} ms")


@pytest.mark.skipif(fuse_unavailable() is not None, reason="power loss needs FUSE")
async def test_an_async_flush_group_losing_power_everywhere_measures_what_it_lost(
        tmp_path: Path) -> None:
    """ASYNC_FLUSH promises nothing across a power loss of every replica: the run
    passes with what was lost measured (each loss with its window), nothing else."""
    result = await run_scenario("controller-async", 0, SEED, tmp_path, ["power-loss-all"])
    assert result.error is None, result.error
    v = result.verdict
    assert v is not None and v.loss_allowed
    assert result.faults["power-loss-all"] == 1
    assert len(v.loss_windows_ms) == len(v.lost)
    assert all(w >= 0 for w in v.loss_windows_ms)
    assert set(v.unconsumed) <= set(v.lost)
    assert v.duplicated == [] and v.reordered == [] and v.replicas_identical, v
    print(f"ASYNC_FLUSH power loss: {len(v.lost)} of {v.acknowledged} acknowledged lost, "
          f"windows {sorted(v.loss_windows_ms)} ms")
