"""The process-level fuzz run of CI: hostile payloads at every listener of a running
controller-mode and DLedger group while the official client produces; afterwards no
process died or logged an escaped exception, a killed master is replaced, and the chaos
verdict holds (nothing acknowledged lost)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from chaos.fuzz import ok, render, run_fuzz

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("netns")]

SEED = int(os.environ.get("CHAOS_SEED") or secrets.randbelow(1_000_000))
FRAMES = 300


@pytest.mark.parametrize("mode", ["controller", "dledger"])
async def test_hostile_payloads_at_every_listener(mode: str, tmp_path: Path) -> None:
    print(f"fuzz seed {SEED} (CHAOS_SEED={SEED} reproduces it)")
    result, report = await run_fuzz(mode, FRAMES, SEED, tmp_path)
    print(render([(result, report)]))
    kinds = {s.kind for s in report.listeners}
    expected = {"remoting", "grpc", "http"} | ({"ha"} if mode == "controller" else set())
    assert expected <= kinds, kinds
    assert all(s.sent == FRAMES for s in report.listeners), \
        [(s.address, s.sent, s.refused) for s in report.listeners if s.sent != FRAMES]
    assert report.crashes == []
    assert result.error is None, result.error
    assert result.verdict is not None and result.verdict.lost == []
    assert ok(result, report)
