"""Consume progress of one consumer group on one queue: pure bookkeeping, time passed in.

Every queue offset in ``[committed, next_new)`` that is not done has an ``Entry``:
either *held* by a consumer until ``deadline_ms``, or *pending* (read but not handed
out: blocked behind an earlier message of its FIFO message group, left for a pop
of another topic, or held and expired). ``committed`` is the lowest offset not done,
the group's consume progress; ``next_new`` is the first offset never read.
"""

from __future__ import annotations

from dataclasses import dataclass

from mqcluster.broker.messaging.errors import Code, MessagingError


@dataclass
class Entry:
    offset: int
    message_group: str | None = None
    epoch: int = 0
    deliveries: int = 0
    pop_time_ms: int = 0
    deadline_ms: int = 0
    for_topic: str | None = None
    owner: str | None = None
    renew_until_ms: int = 0

    def held(self, now_ms: int) -> bool:
        return self.deadline_ms > now_ms

    def expired(self, now_ms: int) -> bool:
        return 0 < self.deadline_ms <= now_ms


class QueueState:
    def __init__(self, committed: int) -> None:
        self.committed = committed
        self.next_new = committed
        self.entries: dict[int, Entry] = {}

    # reading
    def in_order(self) -> list[Entry]:
        return [self.entries[o] for o in sorted(self.entries)]

    def expired(self, now_ms: int) -> list[Entry]:
        return [e for e in self.in_order() if e.expired(now_ms)]

    def next_deadline(self, now_ms: int) -> int | None:
        deadlines = [e.deadline_ms for e in self.entries.values() if e.held(now_ms)]
        return min(deadlines) if deadlines else None

    def held_count(self, now_ms: int) -> int:
        return sum(1 for e in self.entries.values() if e.held(now_ms))

    def blocked_groups(self, now_ms: int) -> set[str]:
        """FIFO message groups with a message held by a consumer right now."""
        return {e.message_group for e in self.entries.values()
                if e.message_group is not None and e.held(now_ms)}

    def candidates(self, now_ms: int, *, fifo: bool, topic: str | None = None) -> list[Entry]:
        """Entries that may be handed out now, in offset order.

        With ``fifo`` an entry is withheld while an earlier entry of its message group
        is held or itself withheld; ``topic`` restricts to entries read for that topic.
        """
        out: list[Entry] = []
        blocked: set[str] = set()
        for e in self.in_order():
            group = e.message_group if fifo else None
            if e.held(now_ms):
                if group is not None:
                    blocked.add(group)
                continue
            if group is not None and group in blocked:
                continue
            if topic is not None and e.for_topic not in (None, topic):
                continue
            out.append(e)
        return out

    # changes
    def add(self, offset: int, *, message_group: str | None = None,
            for_topic: str | None = None) -> Entry:
        """Record a newly read offset as pending; ``next_new`` moves past it."""
        if offset < self.next_new:
            raise ValueError(f"offset {offset} was already read (next is {self.next_new})")
        entry = Entry(offset, message_group=message_group, for_topic=for_topic)
        self.entries[offset] = entry
        self.next_new = offset + 1
        return entry

    def skip_to(self, offset: int) -> None:
        """Offsets from ``next_new`` up to ``offset`` need no delivery (filtered, gone)."""
        if offset > self.next_new:
            self.next_new = offset
            self._recompute()

    def hold(self, entry: Entry, now_ms: int, invisible_ms: int, *, owner: str | None = None,
             renew_for_ms: int = 0) -> Entry:
        """Hand ``entry`` out; with an ``owner`` it may be renewed for ``renew_for_ms``."""
        entry.epoch += 1
        entry.deliveries += 1
        entry.pop_time_ms = now_ms
        entry.deadline_ms = now_ms + invisible_ms
        entry.owner = owner
        entry.renew_until_ms = now_ms + renew_for_ms if owner else 0
        return entry

    def renewable(self, now_ms: int, ahead_ms: int) -> list[Entry]:
        """Held entries with an owner whose invisible time ends within ``ahead_ms``."""
        return [e for e in self.entries.values()
                if e.owner is not None and e.held(now_ms)
                and e.deadline_ms - now_ms <= ahead_ms and now_ms < e.renew_until_ms]

    def done(self, offset: int) -> None:
        if self.entries.pop(offset, None) is not None:
            self._recompute()

    def check_held(self, offset: int, epoch: int, now_ms: int) -> Entry:
        """The entry a receipt handle names, if that delivery is still the current one."""
        entry = self.entries.get(offset)
        if entry is None or entry.epoch != epoch:
            if offset < self.committed or entry is None:
                raise MessagingError(
                    Code.INVALID_RECEIPT_HANDLE,
                    "receipt handle is stale: the message was already acknowledged or redelivered",
                )
            raise MessagingError(
                Code.INVALID_RECEIPT_HANDLE,
                "receipt handle is stale: the message was delivered again since",
            )
        if not entry.held(now_ms):
            raise MessagingError(
                Code.INVALID_RECEIPT_HANDLE, "receipt handle expired: the invisible time is over"
            )
        return entry

    def change_invisible(self, entry: Entry, now_ms: int, invisible_ms: int) -> Entry:
        entry.owner = None
        entry.epoch += 1
        entry.pop_time_ms = now_ms
        entry.deadline_ms = now_ms + invisible_ms
        return entry

    def reset(self, committed: int) -> None:
        self.committed = committed
        self.next_new = committed
        self.entries.clear()

    def _recompute(self) -> None:
        self.committed = min(self.entries) if self.entries else self.next_new
