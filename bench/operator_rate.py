"""API-server request rate of the operator following idle BrokerGroups.

The operator (kopf, production handlers and intervals) runs in-process against
the Kubernetes API emulator with fake election probes that report nothing new;
after every group has its objects, the requests the operator and kopf send to
the emulator are counted over a window that covers a full resync.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from bench import Row

NAME = "operator"
SIZES = tuple(int(n) for n in os.environ.get("OPERATOR_RATE_GROUPS", "10,30,100").split(","))
WINDOW = float(os.environ.get("OPERATOR_RATE_WINDOW_SECONDS", "35"))
NS = "rate"
# The defaults (chart values operator.*, MQCLUSTER_REAPPLY_SECONDS).
FOLLOW, POLL, RESYNC, REAPPLY = 2.0, 0.2, 30.0, 600.0


def _group(name: str) -> dict[str, Any]:
    return {"apiVersion": "mqcluster.io/v1alpha1", "kind": "BrokerGroup",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"mode": "Controller", "replicas": 2, "controllerRef": {"name": "namesrv"}}}


async def _rate(groups: int) -> tuple[float, float]:
    """(requests/s measured over the window, the same plus the periodic re-apply of every
    child spread over REAPPLY seconds)."""
    from mqcluster_testing.operator.kopf_harness import running_operator

    async with running_operator(follow_interval=FOLLOW, poll_interval=POLL,
                                reconcile_interval=RESYNC, reapply_seconds=REAPPLY) as h:
        await h.api.create({"apiVersion": "mqcluster.io/v1alpha1", "kind": "Controller",
                            "metadata": {"name": "namesrv", "namespace": NS},
                            "spec": {"deployment": "EmbeddedInNamesrv", "replicas": 3}})
        names = [f"bg-{g:03d}" for g in range(groups)]
        for name in names:
            await h.api.create(_group(name))
        await h.eventually(
            lambda: all(h.obj("apps/v1/statefulsets", n, NS) for n in names), timeout=120,
            what="every StatefulSet")
        await asyncio.sleep(2 * FOLLOW)
        applies = len(h.emulator.applied)
        before, started = h.emulator.served, time.monotonic()
        await asyncio.sleep(WINDOW)
        measured = (h.emulator.served - before) / (time.monotonic() - started)
        return measured, measured + applies / REAPPLY


def rows() -> list[Row]:
    out = []
    for groups in SIZES:
        measured, steady = asyncio.run(_rate(groups))
        out.append(Row(NAME, f"API requests/s, {groups} idle groups, {WINDOW:.0f} s window",
                       measured, "req/s", note=f"includes a resync ({RESYNC:.0f} s)"))
        out.append(Row(NAME, f"API requests/s, {groups} idle groups, with re-applies",
                       steady, "req/s", "< 2 req/s at 100 groups" if groups == 100 else "",
                       note=f"+ every child re-applied once per {REAPPLY:.0f} s"))
    return out


if __name__ == "__main__":
    from bench import render_table

    print(render_table(rows()))
