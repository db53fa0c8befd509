"""Message filters for ``MessageStore.get_messages``: tag-hash sets, tag filters, predicates."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from mqcluster.store.message import StoredMessage


@functools.lru_cache(maxsize=4096)
def tags_code(tags: str | None) -> int:
    """The tag hash kept in a consume-queue entry: Java's ``String.hashCode`` of the tags."""
    if not tags:
        return 0
    raw = tags.encode("utf-16-be")
    h = 0
    for i in range(0, len(raw), 2):
        h = (31 * h + (raw[i] << 8 | raw[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@dataclass(frozen=True)
class TagFilter:
    """Matches messages whose tag is one of ``tags`` (``"*"`` matches all).

    The consume queue is checked by tag hash first; the tag string is checked on the
    message itself, so hash collisions never leak through.
    """

    tags: frozenset[str]

    @classmethod
    def of(cls, tags: Iterable[str] | str) -> TagFilter:
        if isinstance(tags, str):
            tags = [t.strip() for t in tags.split("||")]
        return cls(frozenset(t for t in tags if t))

    @property
    def matches_all(self) -> bool:
        return not self.tags or "*" in self.tags

    @property
    def codes(self) -> frozenset[int]:
        return frozenset(tags_code(t) for t in self.tags)

    def __call__(self, msg: StoredMessage) -> bool:
        return self.matches_all or (msg.tags or "") in self.tags


MessagePredicate = Callable[[StoredMessage], bool]
MessageFilter = TagFilter | AbstractSet[int] | MessagePredicate
