"""The verdict of a scenario: histories and final stores through ``mqcluster_audit.rules``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.cluster import ChaosCluster
from chaos.workload import parse_key
from mqcluster_audit import rules


@dataclass
class Verdict:
    acknowledged: int = 0
    failed_sends: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    retried: list[str] = field(default_factory=list)
    reordered: list[str] = field(default_factory=list)
    unconsumed: list[str] = field(default_factory=list)
    replicas_identical: bool = False
    unreadable: list[str] = field(default_factory=list)
    """What a check could not read (a history line in the middle of a file that is not
    an event, no producer history at all): the verdict cannot hold then."""
    replicas_detail: str = ""
    max_unavailable_ms: int = 0
    loss_allowed: bool = False
    """The mode does not promise to keep what a power loss of every replica takes
    (ASYNC_FLUSH): its loss is measured in ``loss_windows_ms`` instead of failing."""
    loss_windows_ms: list[int] = field(default_factory=list)
    """Each lost message: from its acknowledgement to the power loss that took it."""

    @property
    def ok(self) -> bool:
        lost = set(self.lost) if not self.loss_allowed else set()
        return (not lost and not self.duplicated and not self.reordered
                and not set(self.unconsumed) - (set(self.lost) - lost)
                and self.replicas_identical and not self.unreadable)


def read_events(paths: list[Path], unreadable: list[str] | None = None
                ) -> list[dict[str, Any]]:
    """Every event of the histories, in the order each was written. Only a file's last
    line may be cut short (its writer killed); any other line that is not an event, and
    a history that is missing, go to ``unreadable``."""
    events = []
    for path in paths:
        if not path.exists():
            if unreadable is not None:
                unreadable.append(f"{path.name}: missing")
            continue
        lines = path.read_text().splitlines()
        for n, line in enumerate(lines, 1):
            try:
                event = json.loads(line)
                if not isinstance(event, dict) or "event" not in event or "key" not in event:
                    raise ValueError("not a history event")
                events.append(event)
            except ValueError:
                if n < len(lines) and unreadable is not None:
                    unreadable.append(f"{path.name} line {n}: {line[:80]!r}")
    return events


def check(cluster: ChaosCluster, master: int, histories: list[Path]) -> Verdict:
    """``master``: the replica whose store is the reference (the final master); the
    brokers must be stopped."""
    unreadable: list[str] = []
    events = read_events(histories, unreadable)
    acks = [e for e in events if e["event"] == "ack"]
    acked = [e["key"] for e in acks]
    copies = []
    for m in cluster.messages(master):
        key = m.body.decode(errors="replace")
        parsed = parse_key(key)
        copies.append(rules.StoredCopy(key, m.uniq_key, m.topic, m.queue_id,
                                       cluster.position(m), cluster.message_group(m),
                                       parsed[1] if parsed else None))
    attempts = rules.send_attempts((e["event"], e["key"]) for e in events)
    duplicated, retried = rules.classify_copies(copies, attempts)
    receipts = [rules.Receipt(e["group"], e["message_group"], e["key"], e["seq"])
                for e in events if e["event"] == "receive" and e.get("message_group")]
    reordered = rules.store_reordered(copies, acked)
    reordered += [f"{r.group}:{r.key}" for r in rules.receive_reordered(receipts)]
    received = {e["key"] for e in events if e["event"] == "receive"}
    same, detail = cluster.replicas_identical()
    lost = rules.lost(acked, (c.key for c in copies))
    return Verdict(
        acknowledged=len(set(acked)),
        failed_sends=sum(e["event"] == "fail" for e in events),
        lost=lost, loss_allowed=not cluster.promises_no_loss,
        loss_windows_ms=loss_windows(lost, acks, cluster.power_losses),
        duplicated=duplicated, retried=retried, reordered=reordered,
        unconsumed=sorted(set(acked) - received),
        replicas_identical=same, replicas_detail=detail, unreadable=unreadable,
        max_unavailable_ms=rules.max_unavailable_ms([e["time_ms"] for e in acks]),
    )


def loss_windows(lost: list[str], acks: list[dict[str, Any]], power_losses: list[int]
                 ) -> list[int]:
    """For each lost message, the ms from its acknowledgement to the first power loss
    after it (a message lost with no power loss after it gets none)."""
    acked_at = {e["key"]: e["time_ms"] for e in acks}
    out = []
    for key in lost:
        at = acked_at.get(key)
        if at is None:
            continue
        after = [t for t in power_losses if t >= at]
        if after:
            out.append(min(after) - at)
    return out
