"""Majority arithmetic, as DLedger's ``MemberState.isQuorum``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T", int, float)


def quorum_size(voter_count: int) -> int:
    return voter_count // 2 + 1


def is_quorum(count: int, voter_count: int) -> bool:
    return count >= quorum_size(voter_count)


def quorum_index(match_indexes: Iterable[T]) -> T | int:
    """The highest value that a majority of the given voters have reached (an index
    they hold, a time by which they had answered)."""
    ordered = sorted(match_indexes, reverse=True)
    if not ordered:
        return 0
    return ordered[quorum_size(len(ordered)) - 1]
