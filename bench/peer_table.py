"""The peers table: one measurement set per system, rows with mqcluster-to-peer ratios.

Pure: takes measurements, returns ``Row``s; no servers, no clocks.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from bench import Row

NAME = "peers"
OURS = ("mqcluster controller", "mqcluster dledger")


@dataclass
class Ledger:
    """Every message id a system acknowledged, and how often a consumer read each back:
    the same check for every system (bodies carry their id)."""

    acked: set[int] = field(default_factory=set)
    read: collections.Counter[int] = field(default_factory=collections.Counter)

    def ack(self, ids: Iterable[int]) -> None:
        self.acked.update(ids)

    def lost(self) -> int:
        """Acknowledged, never read back."""
        return len(self.acked - self.read.keys())

    def duplicated(self) -> int:
        """Ids read back more than once."""
        return sum(1 for n in self.read.values() if n > 1)

    def settle(self, m: Measured) -> None:
        """The counts into ``m``."""
        m.acked, m.read = len(self.acked), sum(self.read.values())
        m.lost, m.duplicated = self.lost(), self.duplicated()


@dataclass
class FaultGaps:
    """The gap around each fault of one kind, and how many were ridden out only once the
    fault was undone (woken, healed)."""

    gaps: list[float] = field(default_factory=list)
    after_heal: int = 0
    dropped: int | None = None
    """Partitions: packets the cut dropped, all faults together (proof it took effect)."""

    def median(self) -> float | None:
        return sorted(self.gaps)[len(self.gaps) // 2] if self.gaps else None

    def note(self) -> str:
        if not self.gaps:
            return ""
        held = (f"; {self.after_heal} of {len(self.gaps)} resumed only once undone"
                if self.after_heal else "; every one resumed while the fault held")
        dropped = "" if self.dropped is None else f"; {self.dropped} packets dropped"
        return f"max {max(self.gaps):.2f} s over {len(self.gaps)}{held}{dropped}"


@dataclass
class Measured:
    """What one system did in the peers bench; ``error`` when it could not run."""

    system: str
    p50_ms: float | None = None
    p99_ms: float | None = None
    pipelined: float | None = None  # msgs/s
    pipelined_auto_batch: float | None = None  # msgs/s, ours: the producer's auto-batch
    cpu_us_auto_batch: dict[str, float] = field(default_factory=dict)
    drain: float | None = None  # msgs/s
    failover: list[float] = field(default_factory=list)  # gap per kill, s
    hang: FaultGaps | None = None  # leader SIGSTOPped
    partition: FaultGaps | None = None  # leader cut off the network
    acked: int = 0  # acknowledged, every phase
    read: int = 0  # messages read back (copies included)
    lost: int | None = None  # acknowledged ids never read back
    duplicated: int | None = None  # ids read back more than once
    cpu_us: dict[str, float] = field(default_factory=dict)  # per process, pipelined phase
    error: str = ""

    def set_faults(self, by_kind: dict[str, FaultGaps]) -> None:
        if "kill" in by_kind:
            self.failover = by_kind["kill"].gaps
        self.hang = by_kind.get("hang")
        self.partition = by_kind.get("partition")


# What each system has done with a message when its publisher gets the acknowledgement,
# as this bench configures it: the throughput and latency rows compare these promises.
ACKNOWLEDGED_WHEN = {
    "mqcluster controller": "written by all 3 replicas (allAckInSyncStateSet), in their page "
                            "cache: ASYNC_FLUSH fsyncs within flushIntervalCommitLog (500 ms)",
    "mqcluster dledger": "fsynced by a majority (2 of 3) in their Raft logs",
    "RabbitMQ quorum queue": "written to the write-ahead log of a majority (2 of 3), which "
                             "fsyncs before it confirms (publisher confirms)",
    "NATS JetStream": "stored by a majority (2 of 3), in their page cache: fsync every "
                      "2 minutes (sync_interval's default)",
}

Metric = tuple[str, str, Callable[[Measured], float | None]]

METRICS: list[Metric] = [
    ("sync publish latency p50", "ms", lambda m: m.p50_ms),
    ("sync publish latency p99", "ms", lambda m: m.p99_ms),
    ("pipelined publish", "msgs/s", lambda m: m.pipelined),
    ("consumer drain", "msgs/s", lambda m: m.drain),
    ("failover gap after leader SIGKILL (median)", "s",
     lambda m: sorted(m.failover)[len(m.failover) // 2] if m.failover else None),
    ("failover gap after leader SIGKILL (max)", "s",
     lambda m: max(m.failover) if m.failover else None),
    ("failover gap after leader SIGSTOP (median)", "s",
     lambda m: m.hang.median() if m.hang else None),
    ("failover gap after a network partition of the leader (median)", "s",
     lambda m: m.partition.median() if m.partition else None),
    ("acknowledged but lost (every phase, by message id)", "msgs",
     lambda m: None if m.lost is None else float(m.lost)),
    ("read back more than once (duplicated)", "msgs",
     lambda m: None if m.duplicated is None else float(m.duplicated)),
]
FAULT_OF: dict[str, Callable[[Measured], FaultGaps | None]] = {
    "failover gap after leader SIGSTOP (median)": lambda m: m.hang,
    "failover gap after a network partition of the leader (median)": lambda m: m.partition,
}
COUNTS = ("acknowledged but lost", "read back more than once")
"""Counts, not rates: no ratio to the peers."""


def ratio(ours: float | None, theirs: float | None) -> str:
    if ours is None or theirs is None or theirs == 0:
        return "n/a"
    return f"{ours / theirs:.2f}"


def ratio_note(metric: Callable[[Measured], float | None], peer: Measured,
               ours: list[Measured]) -> str:
    return "; ".join(f"{o.system}/{peer.system} = {ratio(metric(o), metric(peer))}"
                     for o in ours)


def cpu_note(m: Measured) -> str:
    if not m.cpu_us:
        return ""
    parts = ", ".join(f"{k} {v:.0f}" for k, v in m.cpu_us.items())
    return f"CPU us/msg (pipelined): {parts}; servers {sum_servers(m):.0f}"


def sum_servers(m: Measured) -> float:
    return sum(v for k, v in m.cpu_us.items() if k != "client")


def peer_rows(results: list[Measured]) -> list[Row]:
    """Each metric for each system; peers' rows carry the ratio of each mqcluster mode
    to them. A system that could not run gets one row saying why."""
    ours = [m for m in results if m.system in OURS and not m.error]
    rows: list[Row] = []
    for m in results:
        if m.error:
            rows.append(Row(NAME, f"{m.system}: not measured", None, note=m.error))
    ok = [m for m in results if not m.error]
    for label, unit, metric in METRICS:
        for m in ok:
            if label.startswith(COUNTS):
                note = f"{m.acked} acknowledged, {m.read} read back"
            else:
                note = "" if m.system in OURS else ratio_note(metric, m, ours)
            fault = FAULT_OF.get(label)
            if fault is not None:
                gaps = fault(m)
                note = "; ".join(filter(None, [gaps.note() if gaps else "not measured",
                                               note]))
            rows.append(Row(NAME, f"{m.system}: {label}", metric(m), unit, note=note))
        if label == "pipelined publish":
            rows += auto_batch_rows(ok, ours)
    for m in ok:
        rows.append(Row(NAME, f"{m.system}: server CPU per message (pipelined)",
                        sum_servers(m) if m.cpu_us else None, "us/msg", note=cpu_note(m)))
    for m in ok:
        if m.system in ACKNOWLEDGED_WHEN:
            rows.append(Row(NAME, f"{m.system}: acknowledged when", None,
                            note=ACKNOWLEDGED_WHEN[m.system]))
    return rows


def auto_batch_rows(ok: list[Measured], ours: list[Measured]) -> list[Row]:
    """Ours again with the producer's auto-batch (RocketMQ 5's ``autoBatch``: the sends
    outstanding in one loop turn travel as one batch request, each still answered on
    its own), against each peer's pipelined rate as measured above."""
    peers = [m for m in ok if m.system not in OURS]
    rows = []
    for m in ours:
        if m.pipelined_auto_batch is None:
            continue
        vs = "; ".join(f"vs {p.system} pipelined: {ratio(m.pipelined_auto_batch, p.pipelined)}"
                       for p in peers)
        cpu = ", ".join(f"{k} {v:.0f}" for k, v in m.cpu_us_auto_batch.items())
        rows.append(Row(NAME, f"{m.system}: pipelined publish, producer auto-batch",
                        m.pipelined_auto_batch, "msgs/s",
                        note=f"{vs}; CPU us/msg: {cpu}" if cpu else vs))
    return rows
