"""Operator benchmark: from a master's death to the client Service pointing at the new master.

Three real ``mqcontroller`` processes, stand-in brokers on 127.0.0.x, the
operator (kopf) running in-process against the Kubernetes API emulator with
the real controller probe. Per trial: close the master stand-in (its
connections drop, the controllers elect the in-sync slave), then time until
the slave's pod carries ``role=master`` (what the client Service selects).
The figure includes the controllers' detection and election, and the
operator's poll interval (``follow_interval``, 0.1 s here).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
from pathlib import Path

from bench import Row

NAME = "operator"
TRIALS = 5


async def _main() -> list[Row]:
    from tests.operator.failover import failover_scenario

    latencies: list[float] = []
    with tempfile.TemporaryDirectory(prefix="operator-bench-") as tmp:
        async with failover_scenario(Path(tmp), controllers=3, ns="bench") as sc:
            for trial in range(TRIALS):
                name = f"group-{trial}"
                master, slave = await sc.group(name, first_ip=20 + 2 * trial)
                try:
                    latencies.append(await sc.failover_seconds(name, master))
                finally:
                    await slave.close()
    note = f"{TRIALS} failovers, 3 controllers, follow interval 0.1 s, emulated API"
    return [
        Row(NAME, "master death -> pod role=master, p50", statistics.median(latencies), "s",
            note=note),
        Row(NAME, "master death -> pod role=master, max", max(latencies), "s"),
    ]


def run() -> list[Row]:
    return asyncio.run(_main())


if __name__ == "__main__":
    from bench import render_table

    print(render_table(run()))
