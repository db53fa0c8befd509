"""Checks of remoting request fields that a header's types cannot say: which perm bits a
topic may have, names by the shared rules (a send's are ``messaging.send_checks``).

Each returns ``None`` when the value is acceptable, else the response code and a remark
naming the field, so a handler answers before anything is created or saved.
"""

from __future__ import annotations

from mqcluster.broker.topic_service import TopicRejection, check_group_name, check_topic_name
from mqcluster.protocol.broker import BrokerResponseCode
from mqcluster.store.topic_config import PERM_INHERIT, PERM_PRIORITY, PERM_READ, PERM_WRITE

PERM_BITS = PERM_PRIORITY | PERM_READ | PERM_WRITE | PERM_INHERIT


def perm_problem(perm: int) -> str | None:
    if not 0 <= perm <= PERM_BITS:
        return (f"perm={perm} is outside 0..{PERM_BITS} (PERM_PRIORITY=8, READ=4, "
                "WRITE=2, INHERIT=1)")
    return None


def names_rejection(topic: str | None = None, group: str | None = None,
                    group_kind: str = "consumer group") -> TopicRejection | None:
    """The first name of a request that breaks the shared rules, as a rejection."""
    if topic is not None:
        bad = check_topic_name(topic)
        if bad is not None:
            return TopicRejection(BrokerResponseCode.INVALID_REQUEST, f"topic: {bad.remark}")
    if group is not None:
        return check_group_name(group, group_kind)
    return None
