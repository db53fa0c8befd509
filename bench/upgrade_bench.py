"""Rolling upgrade benchmark: client-visible write unavailability while a 3-replica
controller-mode group is upgraded (``spec.version`` changed) with a producer running.

The scenario of ``tests/operator/follow/test_upgrade_full_loop.py`` (``upgrade_scenario``):
kopf against the Kubernetes API emulator, the StatefulSets run as real ``mqnamesrv``
(controller embedded) and ``mqbroker`` processes, allAckInSyncStateSet; then the same
for a DLedger group (leadership transfer instead of the controller's electMaster). The figure is
the longest time between two acknowledged sends of a producer that sends one message
at a time (each retried until acknowledged) from the version change until
``Upgrading=False/UpToDate``; then every message is consumed and the acknowledged
ones that are missing are counted.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from bench import Row

NAME = "upgrade"
MODES = ("Controller", "DLedger")


async def _one(mode: str) -> list[Row]:
    from mqcluster_testing.operator.upgrade_scenario import report, running, upgrade_with_producer

    with tempfile.TemporaryDirectory(prefix="mq-upgrade-bench-") as tmp:
        async with running(Path(tmp)) as loop:
            run = await upgrade_with_producer(loop, mode)
    print(f"{mode}: {report(run)}", flush=True)
    note = f"pods restarted {' '.join(run.started)}; masters {' -> '.join(run.masters)}"
    return [
        Row(NAME, f"{mode}: longest gap between acknowledged writes", run.longest_gap * 1000,
            "ms", target="< 2000 ms", note=note),
        Row(NAME, f"{mode}: acknowledged messages lost", float(len(run.lost)), "",
            target="0", note=f"{len(run.acked)} acknowledged, {run.attempts} attempts"),
        Row(NAME, f"{mode}: upgrade duration (3 replicas)", run.seconds, "s"),
    ]


async def _run() -> list[Row]:
    return [row for mode in MODES for row in await _one(mode)]


def run() -> list[Row]:
    return asyncio.run(_run())
