"""Subscription filter expressions: tags (``*``, ``a || b``); SQL92 is refused clearly."""

from __future__ import annotations

from enum import Enum

from mqcluster.broker.messaging.errors import Code, MessagingError
from mqcluster.store.filter import TagFilter

MATCH_ALL = TagFilter(frozenset())


class FilterKind(Enum):
    TAG = "TAG"
    SQL92 = "SQL92"


def parse_filter(kind: FilterKind, expression: str) -> TagFilter:
    """The store filter for a subscription; ``""`` and ``"*"`` match every message."""
    if kind is FilterKind.SQL92:
        raise MessagingError(
            Code.UNSUPPORTED, "SQL92 filter expressions are not supported by this broker"
        )
    text = expression.strip()
    if not text or text == "*":
        return MATCH_ALL
    tags = [t.strip() for t in text.split("||")]
    if any(not t for t in tags):
        raise MessagingError(
            Code.ILLEGAL_FILTER_EXPRESSION, f"empty tag in filter expression {expression!r}"
        )
    if any("|" in t for t in tags):
        raise MessagingError(
            Code.ILLEGAL_FILTER_EXPRESSION,
            f"tags are separated by '||' in filter expression {expression!r}",
        )
    if "*" in tags:
        return MATCH_ALL
    return TagFilter(frozenset(tags))
