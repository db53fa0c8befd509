"""The PySpark ``mqaudit history`` job over each scenario's histories and final master
store, when Java is there to run Spark."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from chaos.runner import ScenarioResult, say


def master_store(workdir: Path, master: int) -> Path:
    """The final master's store as the run left it: in a power-loss run the store is a
    lazyfs mount, gone once the run ends, and its files are in the backing directory."""
    store = workdir / f"b{master}" / "store"
    backing = store.with_name("store.disk")
    return backing if backing.is_dir() else store


def run_spark_history(results: list[ScenarioResult], when: str) -> list[str]:
    if when == "no" or (when == "auto" and shutil.which("java") is None):
        return []
    lines = []
    for r in results:
        if r.workdir is None or r.verdict is None or r.master is None:
            continue
        out = r.workdir / "mqaudit-history"
        say(f"{r.scenario}: mqaudit history on Spark (a minute or two)")
        histories = ",".join(str(r.workdir / n) for n in ("producer.jsonl", "consumer.jsonl"))
        done = subprocess.run(
            [sys.executable, "-m", "mqcluster_audit.cli", "history",
             "--stores", f"master={master_store(r.workdir, r.master)}",
             "--history", histories, "--out", str(out)], capture_output=True, text=True)
        try:
            summary = json.loads((out / "summary.json").read_text())
        except (OSError, ValueError):
            lines.append(f"{r.scenario}: mqaudit history failed:\n{done.stderr[-2000:]}")
            continue
        keys = ("verdict", "acknowledged", "lost", "duplicated", "retried", "reordered",
                "max_unavailable_ms")
        lines.append(f"{r.scenario}: mqaudit history (Spark): "
                     + ", ".join(f"{k} {summary.get(k)}" for k in keys))
    return lines
