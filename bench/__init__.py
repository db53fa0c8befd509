"""Benchmarks: ``python -m bench`` runs them all and prints one table.

Each benchmark is a module ``bench/<name>_bench.py`` exposing
``run() -> list[Row]``; ``python -m bench <name> [<name>...]`` runs only those.
Adding a benchmark means adding such a module; nothing else to register.
Benchmarks are not tests: they measure, print, and never assert.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    bench: str
    metric: str
    value: float | None
    unit: str = ""
    target: str = ""
    limit: float | None = None  # the physical ceiling the value compares to, if any
    note: str = ""

    @property
    def ratio(self) -> str:
        if self.value is None or not self.limit:
            return ""
        return f"{self.value / self.limit:.2f}"


def cpu_seconds(pids: list[int]) -> float:
    """User+system CPU time used so far by these processes (Linux /proc)."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def format_value(value: float | None) -> str:
    if value is None:
        return "n/a"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def render_table(rows: list[Row]) -> str:
    header = ("bench", "metric", "value", "unit", "target", "limit", "ratio", "note")
    lines = [
        (
            r.bench,
            r.metric,
            format_value(r.value),
            r.unit,
            r.target,
            "" if r.limit is None else format_value(r.limit),
            r.ratio,
            r.note,
        )
        for r in rows
    ]
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
    out = [
        "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip(),
        "  ".join("-" * w for w in widths),
    ]
    for line in lines:
        out.append("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
    return "\n".join(out)
