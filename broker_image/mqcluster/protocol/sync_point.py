"""RIP-44's truncation point, as a pure function of two epoch lists.

Each list holds ``(epoch, start, end)`` entries, oldest first, the last one ending at
that replica's max offset. Walking the slave's terms from newest to oldest, the first
term the master also has from the same start offset is the consistent point:
everything below ``min(slave end, master end)`` was written by the same master in the
same term, so it is the same bytes on both.

Old segments deleted by retention move a replica's first term start up to its min
offset; such a first term still matches the same term on the other side (they share
the overlap). When nothing matches, the replicas disagree on all they hold: that
needs a person's decision, never a silent wipe.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mqcluster.protocol.epochs import EpochEntry


class NoCommonEpochError(RuntimeError):
    """The slave and the master share no term: replication stops for an operator."""


@dataclass(frozen=True)
class SyncPoint:
    """Where the slave continues from.

    ``truncate_to``: cut the slave's commitlog here, then ask for the bytes after it.
    ``restart_empty``: the slave's data all lies below what the master still keeps;
    it discards its commitlog and copies from the master's oldest (or last) file.
    """

    truncate_to: int
    restart_empty: bool = False


def _matches(mine: EpochEntry, mine_first: bool, theirs: EpochEntry, theirs_first: bool) -> bool:
    if mine.epoch != theirs.epoch:
        return False
    if mine.start_offset == theirs.start_offset:
        return True
    # A first term whose start moved up because old segments were deleted.
    if theirs_first and theirs.start_offset > mine.start_offset:
        return True
    return mine_first and mine.start_offset > theirs.start_offset


def find_sync_point(slave: Sequence[EpochEntry], slave_min: int, slave_max: int,
                    master: Sequence[EpochEntry]) -> SyncPoint:
    """The slave's truncation point against the master's epoch list.

    A slave that stores nothing copies from wherever the master starts it. Raises
    ``NoCommonEpochError`` when the slave holds data but shares no term with the master.
    """
    if slave_max <= slave_min:
        return SyncPoint(0, restart_empty=True)
    if not slave:
        raise NoCommonEpochError(f"this replica holds data up to {slave_max} but no epochs")
    if not master:
        raise NoCommonEpochError("the master has no epoch entries to compare with")
    by_epoch = {e.epoch: (i, e) for i, e in enumerate(master)}
    master_min = master[0].start_offset
    for i in range(len(slave) - 1, -1, -1):
        mine = slave[i]
        found = by_epoch.get(mine.epoch)
        if found is None:
            continue
        j, theirs = found
        if not _matches(mine, i == 0, theirs, j == 0):
            continue
        point = min(mine.end_offset, theirs.end_offset)
        if point < master_min:
            return SyncPoint(0, restart_empty=True)
        return SyncPoint(point)
    raise NoCommonEpochError(
        f"no common epoch: slave terms {_describe(slave)}, master terms {_describe(master)}")


def _describe(entries: Sequence[EpochEntry]) -> str:
    return ", ".join(f"{e.epoch}@{e.start_offset}" for e in entries) or "none"


def with_ends(starts: Sequence[tuple[int, int]], max_offset: int) -> list[EpochEntry]:
    """``(epoch, start)`` pairs -> entries whose ends are the next start (last: max)."""
    out = []
    for i, (epoch, start) in enumerate(starts):
        end = starts[i + 1][1] if i + 1 < len(starts) else max_offset
        out.append(EpochEntry(epoch, start, end))
    return out
