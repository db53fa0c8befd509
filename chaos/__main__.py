"""``python -m chaos [--duration S] [--seed N] [--scenarios controller,dledger] [--overlap]``:
run the chaos scenarios one after another (the duration is shared between them) and
print one table; exit 1 when any scenario lost, duplicated or reordered a message,
left the replicas different, or failed to run. Where FUSE is available the brokers'
stores are ``chaos.lazyfs`` mounts and the faults include power loss; the scenario
``controller-async`` (ASYNC_FLUSH) may lose acknowledged messages to it, and the table
says how many and how long before the power loss they were acknowledged.

``python -m chaos fuzz [--frames N]`` throws hostile frames at every listener of both
groups instead (``chaos.fuzz``)."""

from __future__ import annotations

import argparse
import asyncio
import secrets
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from chaos import table
from chaos.netns import probe
from chaos.runner import CLUSTERS, ScenarioResult, run_scenario, say
from chaos.spark import run_spark_history


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    p.add_argument("--duration", type=float, default=300.0,
                   help="seconds of faults in all, shared by the scenarios (default 300)")
    p.add_argument("--seed", type=int, help="reproduce a run (default: random, printed)")
    p.add_argument("--scenarios", default="controller,dledger",
                   help=f"comma-separated, of: {', '.join(CLUSTERS)}")
    p.add_argument("--faults", help="only these fault kinds (comma-separated)")
    p.add_argument("--overlap", action="store_true",
                   help="also inject overlapping pairs of faults (a master kill during a "
                        "partition, a controller kill during an election)")
    p.add_argument("--workdir", type=Path, help="keep stores, logs and histories here")
    p.add_argument("--spark", choices=("auto", "yes", "no"), default="auto",
                   help="also run `mqaudit history` over each scenario (auto: when Java is "
                        "installed)")
    return p.parse_args(argv)


async def run(a: argparse.Namespace, seed: int, workdir: Path) -> list[ScenarioResult]:
    task = asyncio.current_task()
    assert task is not None
    for sig in (signal.SIGTERM, signal.SIGINT):  # cancel: every scenario cleans up
        asyncio.get_running_loop().add_signal_handler(sig, task.cancel)
    names = [s for s in a.scenarios.split(",") if s]
    faults = a.faults.split(",") if a.faults else None
    share = a.duration / len(names)
    results = []
    for i, name in enumerate(names):
        results.append(await run_scenario(name, share, seed + i, workdir / name, faults,
                                          overlaps=a.overlap))
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["fuzz"]:
        from chaos.fuzz import main as fuzz_main

        return fuzz_main(args[1:])
    a = parse_args(args)
    unknown = set(a.scenarios.split(",")) - set(CLUSTERS)
    if unknown:
        print(f"unknown scenario(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    reason = probe()
    if reason is not None:
        print(f"chaos: cannot run: {reason} (the suite needs root for `ip netns`)",
              file=sys.stderr)
        return 2
    seed = a.seed if a.seed is not None else secrets.randbelow(1_000_000)
    workdir = a.workdir or Path(tempfile.mkdtemp(prefix="mqchaos-"))
    say(f"seed {seed} (reproduce with --seed {seed}); files in {workdir}")
    started = time.monotonic()
    try:
        results = asyncio.run(run(a, seed, workdir))
    except (asyncio.CancelledError, KeyboardInterrupt):
        print(f"chaos: interrupted; namespaces and processes removed, files in {workdir}",
              file=sys.stderr)
        return 130
    spark_lines = run_spark_history(results, a.spark)
    print()
    print(table.render(results))
    for line in spark_lines:
        print(line)
    print(f"seed {seed}, {time.monotonic() - started:.0f} s")
    ok = all(r.ok for r in results)
    if ok and a.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    elif not ok:
        print(f"stores, logs and histories kept in {workdir}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
