"""Majority arithmetic, as DLedger's ``MemberState.isQuorum``."""

from __future__ import annotations

from collections.abc import Iterable


def quorum_size(voter_count: int) -> int:
    return voter_count // 2 + 1


def is_quorum(count: int, voter_count: int) -> bool:
    return count >= quorum_size(voter_count)


def quorum_index(match_indexes: Iterable[int]) -> int:
    """The highest index that a majority of the given voters hold."""
    ordered = sorted(match_indexes, reverse=True)
    if not ordered:
        return 0
    return ordered[quorum_size(len(ordered)) - 1]
