"""Run benchmarks and print one table: ``python -m bench [--quick] [name ...]``."""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import time
import traceback

from bench import Row, render_table

SUFFIX = "_bench"


def available() -> list[str]:
    import bench

    return sorted(
        m.name[: -len(SUFFIX)]
        for m in pkgutil.iter_modules(bench.__path__)
        if m.name.endswith(SUFFIX)
    )


def main(argv: list[str]) -> int:
    if "--quick" in argv:  # a smoke run: benches that look at BENCH_QUICK shorten
        os.environ["BENCH_QUICK"] = "1"
        argv = [a for a in argv if a != "--quick"]
    names = argv or available()
    unknown = [n for n in names if n not in available()]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; available: {', '.join(available())}")
        return 2
    rows: list[Row] = []
    failed = False
    for name in names:
        print(f"== {name} ...", flush=True)
        started = time.monotonic()
        try:
            module = importlib.import_module(f"bench.{name}{SUFFIX}")
            rows.extend(module.run())
        except Exception:
            traceback.print_exc()
            rows.append(Row(name, "FAILED", None, note="see traceback above"))
            failed = True
        print(f"== {name} done in {time.monotonic() - started:.1f} s", flush=True)
    print()
    print(render_table(rows))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
