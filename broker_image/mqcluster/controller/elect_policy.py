"""Election policy (RocketMQ's DefaultElectPolicy), pure.

Candidates are the alive members of the SyncStateSet; only if none is
eligible and unclean election is enabled, the alive replicas of the group.
Among the eligible:

1. an alive old master is kept, unless an admin names another broker;
2. a broker an admin names is chosen if eligible, otherwise nobody;
3. otherwise the highest last epoch, then the highest max offset, then the
   lowest ``brokerElectionPriority``, then the lowest broker id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Candidate:
    """What the active controller knows of an alive replica from its heartbeats."""

    broker_id: int
    epoch: int = 0
    max_offset: int = 0
    election_priority: int = 0


def rank_key(c: Candidate) -> tuple[int, int, int, int]:
    return (-c.epoch, -c.max_offset, c.election_priority, c.broker_id)


def _try_elect(
    brokers: Iterable[int],
    alive: Mapping[int, Candidate],
    old_master: int | None,
    designated: int | None,
) -> int | None:
    eligible = [alive[b] for b in brokers if b in alive]
    if not eligible:
        return None
    ids = {c.broker_id for c in eligible}
    if old_master is not None and old_master in ids and designated in (None, old_master):
        return old_master
    if designated is not None:
        return designated if designated in ids else None
    return min(eligible, key=rank_key).broker_id


def elect(
    sync_state_set: Iterable[int],
    all_replicas: Iterable[int] | None,
    alive: Mapping[int, Candidate],
    old_master: int | None,
    designated: int | None = None,
) -> int | None:
    """The new master, or None when nobody is eligible.

    ``all_replicas`` is None unless unclean election is enabled.
    """
    chosen = _try_elect(sync_state_set, alive, old_master, designated)
    if chosen is None and all_replicas is not None:
        chosen = _try_elect(all_replicas, alive, old_master, designated)
    return chosen
