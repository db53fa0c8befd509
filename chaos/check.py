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
    replicas_detail: str = ""
    max_unavailable_ms: int = 0

    @property
    def ok(self) -> bool:
        return (not self.lost and not self.duplicated and not self.reordered
                and not self.unconsumed and self.replicas_identical)


def read_events(paths: list[Path]) -> list[dict[str, Any]]:
    events = []
    for path in paths:
        for line in path.read_text().splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue  # a line cut short by a killed writer
    return events


def check(cluster: ChaosCluster, master: int, histories: list[Path]) -> Verdict:
    """``master``: the replica whose store is the reference (the final master); the
    brokers must be stopped."""
    events = read_events(histories)
    acks = [e for e in events if e["event"] == "ack"]
    acked = [e["key"] for e in acks]
    copies = []
    for m in cluster.messages(master):
        key = m.body.decode(errors="replace")
        parsed = parse_key(key)
        copies.append(rules.StoredCopy(key, m.uniq_key, m.topic, m.queue_id,
                                       cluster.position(m), cluster.message_group(m),
                                       parsed[1] if parsed else None))
    duplicated, retried = rules.classify_copies(copies)
    receipts = [rules.Receipt(e["group"], e["message_group"], e["key"], e["seq"])
                for e in events if e["event"] == "receive" and e.get("message_group")]
    reordered = rules.store_reordered(copies, acked)
    reordered += [f"{r.group}:{r.key}" for r in rules.receive_reordered(receipts)]
    received = {e["key"] for e in events if e["event"] == "receive"}
    same, detail = cluster.replicas_identical()
    return Verdict(
        acknowledged=len(set(acked)),
        failed_sends=sum(e["event"] == "fail" for e in events),
        lost=rules.lost(acked, (c.key for c in copies)),
        duplicated=duplicated, retried=retried, reordered=reordered,
        unconsumed=sorted(set(acked) - received),
        replicas_identical=same, replicas_detail=detail,
        max_unavailable_ms=rules.max_unavailable_ms([e["time_ms"] for e in acks]),
    )
