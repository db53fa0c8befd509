"""Epoch entries of a controller-mode group's replicas, and conflicts with the master's.

Every broker keeps its epoch file (RIP-44: ``<masterEpoch, startOffset>`` per master
term) on its PVC. A replica whose history shares no term with the master's cannot be
truncated to a consistent point: its broker stops replicating and waits for a person
(``mqcluster.ha.slave``) instead of crash-looping, and never rejoins the SyncStateSet.
The same holds for a PVC retained from an earlier life of the group and reused.

The follower reads every replica's entries (``getBrokerEpoch``) into
``status.replicas[].epochs``; ``find_conflicts`` runs the broker's own truncation
function on them, and ``plan_epochs`` reports the replicas that have no common epoch
with the master as ``Degraded``, reason ``EpochConflict``, with a Warning Event. The
annotation ``mqcluster.io/wipe-replica: <pod>`` approves wiping that replica's store:
its PVC and its pod are deleted, the StatefulSet gives the new pod an empty volume, and
the replica copies from the master.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mqcluster.protocol.epochs import EpochEntry
from mqcluster.protocol.sync_point import NoCommonEpochError, find_sync_point

CONFLICT = "EpochConflict"


@dataclass(frozen=True)
class ReplicaEpochs:
    """One replica's answer to getBrokerEpoch: ``(epoch, start, end)`` oldest first, the
    last one ending at ``max_offset``."""

    entries: tuple[tuple[int, int, int], ...]
    max_offset: int

    def status(self) -> list[dict[str, Any]]:
        """``status.replicas[].epochs``: the current (last) entry has no end."""
        out: list[dict[str, Any]] = []
        for i, (epoch, start, end) in enumerate(self.entries):
            entry: dict[str, Any] = {"epoch": epoch, "startOffset": start}
            if i + 1 < len(self.entries):
                entry["endOffset"] = end
            out.append(entry)
        return out

    def truncation_input(self) -> tuple[list[EpochEntry], int]:
        entries = [EpochEntry(e, s, end) for e, s, end in self.entries]
        return entries, (entries[0].start_offset if entries else 0)


def find_conflicts(master: str | None,
                   replicas: Mapping[str, ReplicaEpochs]) -> dict[str, str]:
    """Replicas (by pod) that share no epoch with the master's history, with the reason;
    nothing when the master's entries are not known."""
    if master is None or master not in replicas:
        return {}
    theirs, _ = replicas[master].truncation_input()
    out: dict[str, str] = {}
    for pod, replica in sorted(replicas.items()):
        if pod == master:
            continue
        mine, first = replica.truncation_input()
        try:
            find_sync_point(mine, first, replica.max_offset, theirs)
        except NoCommonEpochError as exc:
            out[pod] = str(exc)
    return out


@dataclass(frozen=True)
class EpochStep:
    conflicts: list[str] | None = None
    """New ``status.epochConflicts``; None leaves it as it is."""
    condition: tuple[bool, str, str] | None = None
    """(Degraded?, reason, message)."""
    events: tuple[tuple[str, str], ...] = ()
    """(type, message) of EpochConflict events."""
    wipe: str | None = None
    """Pod whose PVC and pod are deleted: it starts again on an empty store."""
    clear_annotation: bool = False


def plan_epochs(found: Mapping[str, str], read: Collection[str], recorded: Sequence[str],
                master: str | None, pods: Sequence[str], annotation: str | None) -> EpochStep:
    """What to report and do about the replicas whose epochs conflict with the master's.

    ``found``: this round's conflicts (``find_conflicts``) among the pods ``read``;
    ``recorded``: the conflicts in status (one not read this round stays);
    ``annotation``: the pod named by ``mqcluster.io/wipe-replica``.
    """
    events: list[tuple[str, str]] = []
    wipe = None
    if annotation:
        if annotation == master:
            events.append(("Warning", f"wipe of {annotation} refused: it is the master;"
                                      " switch over first"))
        elif annotation not in pods:
            events.append(("Warning", f"wipe of {annotation} refused: not a pod of this group"))
        else:
            wipe = annotation
            events.append(("Normal", f"wiping the store of {annotation} as approved: its PVC"
                                     " and pod are deleted, it resyncs from the master"))
    kept = {p: "not read this round" for p in recorded if p not in read}
    found = {**kept, **found}
    now = sorted(p for p in found if p != wipe)
    for pod in now:
        if pod not in recorded:
            events.append(("Warning", f"{pod} shares no epoch with master {master}: {found[pod]};"
                                      f" annotate mqcluster.io/wipe-replica={pod} to wipe its"
                                      " store and resync it"))
    for pod in recorded:
        if pod not in found and pod != wipe:
            events.append(("Normal", f"{pod}'s epochs agree with the master's again"))
    if now:
        condition = (True, CONFLICT, "no common epoch with master "
                     f"{master}: {', '.join(now)}; annotate mqcluster.io/wipe-replica=<pod>"
                     " to wipe a replica's store and resync it")
    else:
        condition = (False, "EpochsConsistent", "every replica shares an epoch with the master")
    return EpochStep(
        conflicts=now if now != sorted(recorded) else None,
        condition=condition,
        events=tuple(events),
        wipe=wipe,
        clear_annotation=annotation is not None,
    )
