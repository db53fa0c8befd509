"""A job's output: Parquet tables, ``summary.json`` and a self-contained ``report.html``
whose plots are inline SVG (it opens with no network)."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from mqcluster_audit.jobs import JobResult

COLORS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1")


def _svg(width: int, height: int, body: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'font-family="sans-serif" font-size="11">{body}</svg>')


def bars(items: list[tuple[str, float]], title: str) -> str:
    """Horizontal bars, one per labelled value."""
    if not items:
        return f"<p>{html.escape(title)}: nothing to plot</p>"
    top = max(v for _, v in items) or 1.0
    row, width = 18, 640
    parts = [f'<text x="0" y="12" font-weight="bold">{html.escape(title)}</text>']
    for i, (label, value) in enumerate(items):
        y = 20 + i * row
        w = int((width - 260) * value / top)
        parts.append(f'<text x="0" y="{y + 12}">{html.escape(label)}</text>'
                     f'<rect x="200" y="{y}" width="{w}" height="{row - 4}" fill="{COLORS[0]}"/>'
                     f'<text x="{205 + w}" y="{y + 12}">{value:,.0f}</text>')
    return _svg(width, 30 + len(items) * row, "".join(parts))


def ranges(rows: list[tuple[str, float, float, str]], title: str, marker: float | None = None,
           ) -> str:
    """Labelled [start, end) ranges on one axis (epochs per replica, failover windows)."""
    if not rows:
        return f"<p>{html.escape(title)}: nothing to plot</p>"
    lo = min(r[1] for r in rows)
    hi = max(max(r[2] for r in rows), marker or lo) or 1.0
    span = (hi - lo) or 1.0
    width, row = 640, 20
    labels = sorted({r[0] for r in rows})
    parts = [f'<text x="0" y="12" font-weight="bold">{html.escape(title)}</text>']
    for label, start, end, tag in rows:
        y = 20 + labels.index(label) * row
        x = 160 + int((width - 180) * (start - lo) / span)
        w = max(2, int((width - 180) * (end - start) / span))
        color = COLORS[hash(tag) % len(COLORS)]
        parts.append(f'<rect x="{x}" y="{y}" width="{w}" height="{row - 4}" fill="{color}">'
                     f"<title>{html.escape(tag)}: {start:,.0f}-{end:,.0f}</title></rect>")
    for i, label in enumerate(labels):
        parts.append(f'<text x="0" y="{32 + i * row}">{html.escape(label)}</text>')
    if marker is not None:
        x = 160 + int((width - 180) * (marker - lo) / span)
        parts.append(f'<line x1="{x}" x2="{x}" y1="16" y2="{24 + len(labels) * row}" '
                     f'stroke="red"/><text x="{x + 3}" y="{34 + len(labels) * row}">'
                     f"confirm {marker:,.0f}</text>")
    return _svg(width, 44 + len(labels) * row, "".join(parts))


def plots_of(result: JobResult) -> list[str]:
    p = result.plots
    if result.job == "consistency":
        rows = [(r["replica"], r["start_offset"], r["end_offset"], f"epoch {r['epoch']}")
                for r in p.get("epochs", [])]
        return [ranges(rows, "Offsets per replica and epoch", p.get("confirm"))]
    if result.job == "lag":
        items = [(f"{r['group']} {r['topic']}#{r['queue_id']}", r["lag_messages"])
                 for r in p.get("lag", [])]
        return [bars(items, "Lag per queue (messages)")]
    if result.job == "history":
        rows = [("unavailable", w["last_ack_ms"], w["next_ack_ms"],
                 f"{w['unavailable_ms']} ms") for w in p.get("windows", [])]
        return [ranges(rows, "Failover timeline (no acknowledged send)")]
    return []


def write(result: JobResult, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    for name, table in result.tables.items():
        table.write.mode("overwrite").parquet(str(out / f"{name}.parquet"))
    summary = {"job": result.job, "ok": result.ok, **result.summary}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    samples = "".join(
        f"<h3>{html.escape(name)}</h3><pre>{html.escape(_preview(table))}</pre>"
        for name, table in result.tables.items())
    verdict = "passed" if result.ok else "FAILED"
    page = (f"<!doctype html><meta charset='utf-8'><title>mqaudit {result.job}</title>"
            f"<h1>mqaudit {html.escape(result.job)}: {verdict}</h1>"
            f"<pre>{html.escape(json.dumps(result.summary, indent=2, default=str))}</pre>"
            + "".join(plots_of(result)) + samples)
    path = out / "report.html"
    path.write_text(page)
    return path


def _preview(table: Any, n: int = 20) -> str:
    rows = table.limit(n).collect()
    if not rows:
        return "(empty)"
    cols = table.columns
    lines = ["\t".join(cols)] + ["\t".join(str(r[c]) for c in cols) for r in rows]
    return "\n".join(lines)
