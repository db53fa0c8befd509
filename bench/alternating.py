"""Replicated/unreplicated ratios from alternating rounds, each replicated phase
bracketed by a check that every replica stayed in.

This machine's speed drifts by tens of percent over minutes, so one phase of each side
gives a ratio the drift decides. A round here is one phase of each, a few seconds
apart, the side going first swapping every round; the row gives the median of each
side and every round's ratio. A replica that fell out during a replicated phase would
make its rate a 1- or 2-replica rate: the SyncStateSet (controller mode) or each
replica's DLedger indexes (DLedger mode) are read at the start and end of every
replicated phase, and a phase where a replica fell out, or where they could not be
read, fails the row, saying why.

Pure: no processes, no clocks.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mqcluster.client.controller import ReplicaInfo

PLAIN, REPLICATED = "unreplicated", "replicated"


def order(round_no: int) -> tuple[str, str]:
    """Which side goes first in round ``round_no``: they swap every round, so neither
    always runs on the machine the other one left."""
    return (PLAIN, REPLICATED) if round_no % 2 == 0 else (REPLICATED, PLAIN)


@dataclass
class Rounds:
    """Each round's rate of both sides, and what went wrong in its replicated phase."""

    plain: list[float] = field(default_factory=list)
    replicated: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """``round N: why`` for every replicated phase a replica fell out of."""

    def add_problem(self, round_no: int, why: str | None) -> None:
        if why:
            self.problems.append(f"round {round_no + 1}: {why}")

    @property
    def failed(self) -> bool:
        return bool(self.problems) or not self.replicated

    def ratios(self) -> list[float]:
        return [r / p for p, r in zip(self.plain, self.replicated, strict=False) if p]

    def note(self) -> str:
        """Medians, each round's rates and ratio, and why the row failed if it did."""
        parts = []
        if self.problems:
            parts.append("FAILED: " + "; ".join(self.problems))
        if self.replicated and self.plain:
            parts.append(
                f"median of {len(self.replicated)} alternating rounds; ratio per round "
                + ", ".join(f"{x:.2f}" for x in self.ratios())
                + f" (median {statistics.median(self.ratios()):.2f}); replicated per round "
                + ", ".join(f"{x:,.0f}" for x in self.replicated) + "; unreplicated "
                + ", ".join(f"{x:,.0f}" for x in self.plain))
        return "; ".join(parts)

    def metric(self, label: str) -> str:
        return f"{label}: FAILED" if self.failed else label


def sync_state_set_problem(size: int, start: ReplicaInfo | None,
                           end: ReplicaInfo | None) -> str | None:
    """Why a controller-mode phase did not run on all ``size`` replicas, or None: the
    SyncStateSet must be whole at its start and end and its epoch unchanged (a member
    that fell out and came back in between bumps it twice)."""
    if start is None or end is None:
        return f"the SyncStateSet could not be read at the {'start' if start is None else 'end'}"
    for when, info in (("start", start), ("end", end)):
        if len(info.sync_state_set) < size:
            return (f"SyncStateSet {sorted(info.sync_state_set)} at the {when}, "
                    f"{size} replicas expected")
    if end.sync_state_set_epoch != start.sync_state_set_epoch:
        return (f"SyncStateSet epoch {start.sync_state_set_epoch} at the start, "
                f"{end.sync_state_set_epoch} at the end: a replica fell out in between")
    if end.master_address != start.master_address:
        return f"master {start.master_address} at the start, {end.master_address} at the end"
    return None


Status = Mapping[str, object]


def _int(st: Status, key: str) -> int:
    v = st.get(key)
    if not isinstance(v, int):
        raise ValueError(f"DLedger status without an integer {key}: {dict(st)}")
    return v


def dledger_problem(start: Sequence[Status | None], end: Sequence[Status | None],
                    min_share: float = 0.5) -> str | None:
    """Why a DLedger phase did not run on every replica, or None. At the start every
    replica answers, one leads, and all have applied the same index (caught up); at the
    end the same replica leads in the same term, and every follower has stored at least
    ``min_share`` of the entries the leader committed during the phase. A majority
    commits without the third replica, so a slow follower may trail; one that fell out
    of the phase stored next to none of it."""
    for when, sts in (("start", start), ("end", end)):
        silent = [f"b{i}" for i, s in enumerate(sts) if s is None]
        if silent:
            return f"{', '.join(silent)} did not answer DLEDGER_STATUS at the {when}"
    first = [s for s in start if s is not None]
    last = [s for s in end if s is not None]
    try:
        leaders = [i for i, s in enumerate(first) if s.get("role") == "LEADER"]
        if len(leaders) != 1:
            return f"{len(leaders)} leaders at the start"
        lead = leaders[0]
        applied = {_int(s, "appliedIndex") for s in first}
        if len(applied) != 1:
            return f"replicas not caught up at the start: applied {sorted(applied)}"
        if last[lead].get("role") != "LEADER" or \
                _int(last[lead], "term") != _int(first[lead], "term"):
            return f"b{lead} led at the start, not in the same term at the end"
        base = applied.pop()
        committed = _int(last[lead], "commitIndex") - base
        if committed <= 0:
            return "the leader committed nothing during the phase"
        for i, s in enumerate(last):
            stored = _int(s, "lastIndex") - base
            if i != lead and stored < committed * min_share:
                return (f"b{i} stored {stored} of the {committed} entries the leader "
                        f"committed during the phase: it fell out")
    except ValueError as exc:
        return str(exc)
    return None
