"""The history rules, in plain Python: what counts as lost, duplicated, retried,
reordered and unavailable. The chaos suite applies them directly; the Spark
``history`` job applies the same functions to the groups it builds.

- **lost**: acknowledged (an ``ack`` event) and in no copy of the final store.
- **duplicated** / **retried**: a key stored more than once. Copies that are separate
  appends of the same message (one producer message id, different queue positions) are
  a client's retry of a send whose ack it never got, RocketMQ's at-least-once, counted
  apart as *retried*: but only as many copies as the producer's history shows attempts
  (``send`` events for the key up to its ``ack``; the producer writes one per attempt,
  its client's own retries included). A copy more than the client attempted, the same
  queue position stored twice, or copies that do not all carry one producer message
  id, is the store's own fault: *duplicated*.
- **reordered** (FIFO, per message group): in the store, the first copies of
  acknowledged messages must follow the producer's ``seq``; at a consumer, a message
  delivered for the first time must not come after one with a higher ``seq`` (a
  redelivery of something already received is at-least-once, not a reorder).
- **unavailability**: the longest gap between consecutive acknowledgements.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class StoredCopy:
    """One stored message, in commitlog order."""

    key: str
    msg_id: str | None
    topic: str
    queue_id: int
    position: str
    """Where the store put it: the queue offset, or the DLedger ``index.pos``."""
    message_group: str | None = None
    seq: int | None = None


@dataclass(frozen=True)
class Receipt:
    """A ``receive`` event, in the order the consumer saw them."""

    group: str
    message_group: str
    key: str
    seq: int


def lost(acked: Iterable[str], stored_keys: Iterable[str]) -> list[str]:
    present = set(stored_keys)
    return sorted(set(acked) - present)


def send_attempts(events: Iterable[tuple[str, str]]) -> dict[str, int]:
    """How many times the producer tried each key up to its first ``ack``: ``send``
    events, given as (event, key) in the order the producer wrote them. A send after
    the ack cannot explain a copy the ack was for, and is not counted."""
    attempts: dict[str, int] = defaultdict(int)
    acked: set[str] = set()
    for event, key in events:
        if event == "ack":
            acked.add(key)
        elif event == "send" and key not in acked:
            attempts[key] += 1
    return dict(attempts)


def classify_copies(copies: Iterable[StoredCopy], attempts: Mapping[str, int]
                    ) -> tuple[list[str], list[str]]:
    """(duplicated, retried) keys; ``attempts`` from ``send_attempts`` (a key missing
    from it was never seen sent, so none of its extra copies is a retry)."""
    by_key: dict[str, list[StoredCopy]] = defaultdict(list)
    for c in copies:
        by_key[c.key].append(c)
    duplicated, retried = [], []
    for key, cs in by_key.items():
        if len(cs) < 2:
            continue
        positions = {(c.topic, c.queue_id, c.position) for c in cs}
        ids = {c.msg_id for c in cs}
        if (len(positions) < len(cs) or len(ids) > 1 or None in ids
                or len(cs) > attempts.get(key, 0)):
            duplicated.append(key)
        else:
            retried.append(key)
    return sorted(duplicated), sorted(retried)


def store_reordered(copies: Iterable[StoredCopy], acked: Iterable[str]) -> list[str]:
    """Acknowledged keys whose first copy comes after a higher ``seq`` of its group."""
    ok = set(acked)
    seen: set[str] = set()
    highest: dict[str, int] = {}
    out = []
    for c in copies:
        if c.key in seen or c.key not in ok or c.message_group is None or c.seq is None:
            continue
        seen.add(c.key)
        top = highest.get(c.message_group)
        if top is not None and c.seq < top:
            out.append(c.key)
        highest[c.message_group] = max(c.seq, top if top is not None else c.seq)
    return out


def receive_reordered(receipts: Iterable[Receipt]) -> list[Receipt]:
    """First deliveries that came after a higher ``seq`` of the same group and message
    group (receipts in the order they were received)."""
    seen: set[tuple[str, str]] = set()
    highest: dict[tuple[str, str], int] = {}
    out = []
    for r in receipts:
        g = (r.group, r.message_group)
        if (r.group, r.key) in seen:
            continue
        seen.add((r.group, r.key))
        top = highest.get(g)
        if top is not None and r.seq < top:
            out.append(r)
        highest[g] = max(r.seq, top if top is not None else r.seq)
    return out


def unavailable_windows(ack_times_ms: Sequence[int], gap_ms: int) -> list[tuple[int, int]]:
    """(last ack before, first ack after) for every gap longer than ``gap_ms``."""
    times = sorted(ack_times_ms)
    return [(a, b) for a, b in itertools.pairwise(times) if b - a > gap_ms]


def max_unavailable_ms(ack_times_ms: Sequence[int]) -> int:
    times = sorted(ack_times_ms)
    return max((b - a for a, b in itertools.pairwise(times)), default=0)
