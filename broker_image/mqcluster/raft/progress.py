"""The leader's view of one follower: nextIndex/matchIndex and the push window.

PROBE sends one push at a time until the follower's log matches; REPLICATE then
keeps up to ``max_inflight_appends`` batches in flight (DLedger 4.8 pipelining);
SNAPSHOT waits for an InstallSnapshot answer.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import Enum


class ProgressState(Enum):
    PROBE = "PROBE"
    REPLICATE = "REPLICATE"
    SNAPSHOT = "SNAPSHOT"


@dataclass(slots=True)
class Progress:
    next_index: int
    match_index: int = 0
    state: ProgressState = ProgressState.PROBE
    inflight: deque[int] = field(default_factory=deque)  # last index of each unacked push
    last_send: float = float("-inf")
    last_heard: float = float("-inf")  # any answer from the follower in this term
    reset_seq: int = 0  # pushes up to this sequence number predate the last probe_from

    def window_full(self, max_inflight: int) -> bool:
        if self.state == ProgressState.REPLICATE:
            return len(self.inflight) >= max_inflight
        return len(self.inflight) > 0

    def acked(self, match_index: int) -> bool:
        """A push was acknowledged; True if the match index moved."""
        while self.inflight and self.inflight[0] <= match_index:
            self.inflight.popleft()
        moved = match_index > self.match_index
        self.match_index = max(self.match_index, match_index)
        self.next_index = max(self.next_index, self.match_index + 1)
        if self.state == ProgressState.PROBE:
            self.state = ProgressState.REPLICATE
        return moved

    def probe_from(self, next_index: int) -> None:
        """Start over from ``next_index`` (a rejection, a lost push, a snapshot)."""
        self.state = ProgressState.PROBE
        self.next_index = max(self.match_index + 1, next_index)
        self.inflight.clear()
