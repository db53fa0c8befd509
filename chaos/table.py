"""The summary table of a chaos run, one row per scenario."""

from __future__ import annotations

from chaos.runner import ScenarioResult

HEADER = ("scenario", "seed", "faults", "no effect", "acked", "lost", "duplicated",
          "retried", "reordered", "replicas", "max unavail", "verdict")


def row(r: ScenarioResult) -> tuple[str, ...]:
    v = r.verdict
    faults = str(sum(r.faults.values()))
    no_effect = str(sum(r.no_effect.values()))
    if v is None:
        return (r.scenario, str(r.seed), faults, no_effect, *("-",) * 7, "ERROR")
    return (r.scenario, str(r.seed), faults, no_effect, str(v.acknowledged), str(len(v.lost)),
            str(len(v.duplicated)), str(len(v.retried)), str(len(v.reordered)),
            "identical" if v.replicas_identical else "DIFFER",
            f"{v.max_unavailable_ms / 1000:.1f} s", "ok" if r.ok else "FAILED")


def aligned(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    """``header`` and ``rows`` in columns as wide as their widest cell, the header
    underlined with dashes."""
    lines = [header, *rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
           for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return out


def render(results: list[ScenarioResult]) -> str:
    out = aligned(HEADER, [row(r) for r in results])
    for r in results:
        kinds = ", ".join(f"{k} x{n}" for k, n in sorted(r.faults.items()))
        out.append(f"{r.scenario}: faults that took effect {kinds or 'none'}")
        if r.no_effect:
            missed = ", ".join(f"{k} x{n}" for k, n in sorted(r.no_effect.items()))
            out.append(f"{r.scenario}: faults without effect (not counted) {missed}")
        if r.verdict is not None:
            v = r.verdict
            out.append(f"{r.scenario}: replicas {v.replicas_detail}; failed sends "
                       f"{v.failed_sends}; acknowledged but not consumed {len(v.unconsumed)}")
            if v.loss_allowed:
                w = sorted(v.loss_windows_ms)
                out.append(f"{r.scenario}: power loss took {len(v.lost)} acknowledged "
                           f"messages (allowed: ASYNC_FLUSH)" + (
                               f", acknowledged up to {w[-1]} ms before the power loss "
                               f"(median {w[len(w) // 2]} ms)" if w else ""))
            lost = "lost (allowed)" if v.loss_allowed else "lost"
            for label, keys in ((lost, v.lost), ("duplicated", v.duplicated),
                                ("reordered", v.reordered), ("unreadable", v.unreadable)):
                if keys:
                    out.append(f"{r.scenario}: {label}: {', '.join(keys[:10])}"
                               f"{' ...' if len(keys) > 10 else ''}")
        if r.error:
            out.append(f"{r.scenario}: error: {r.error}")
    return "\n".join(out)
