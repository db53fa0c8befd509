"""Checks of remoting request fields that a header's types cannot say: which sysFlag
bits a send may carry, which perm bits a topic may have, names by the shared rules.

Each returns ``None`` when the value is acceptable, else the response code and a remark
naming the field, so a handler answers before anything is created or saved.
"""

from __future__ import annotations

from mqcluster.broker.protocol import BrokerResponseCode
from mqcluster.broker.topic_service import TopicRejection, check_group_name, check_topic_name
from mqcluster.store.topic_config import PERM_INHERIT, PERM_PRIORITY, PERM_READ, PERM_WRITE

# RocketMQ's MessageSysFlag bits a producer may set on a send: COMPRESSED_FLAG,
# MULTI_TAGS_FLAG and the compression type (bits 8-10). The transaction types (bits
# 2-3) are refused (see ``send_sys_flag_rejection``); the others (host-address
# families, inner batch, unwrap) are the broker's own or features this broker lacks.
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_TYPE_MASK = 0x3 << 2
COMPRESSION_TYPE_MASK = 0x7 << 8
SEND_SYS_FLAG_BITS = COMPRESSED_FLAG | MULTI_TAGS_FLAG | COMPRESSION_TYPE_MASK
PERM_BITS = PERM_PRIORITY | PERM_READ | PERM_WRITE | PERM_INHERIT

TRANSACTIONS_ON_GRPC = (
    "transactional messages (sysFlag bits 0x4/0x8) are not accepted on the remoting "
    "protocol: send them through the gRPC endpoint, which handles EndTransaction and "
    "the check-back to the producer"
)


class RequestRefused(Exception):
    """A request refused with a RocketMQ response code and a remark naming the field."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


def send_sys_flag_rejection(sys_flag: int) -> TopicRejection | None:
    if sys_flag & TRANSACTION_TYPE_MASK:
        return TopicRejection(BrokerResponseCode.NO_PERMISSION,
                              f"sysFlag={sys_flag}: {TRANSACTIONS_ON_GRPC}")
    unknown = sys_flag & ~SEND_SYS_FLAG_BITS
    if unknown:
        return TopicRejection(
            BrokerResponseCode.INVALID_REQUEST,
            f"sysFlag={sys_flag} has bits {unknown & 0xFFFFFFFF:#x} a send may not set "
            f"(allowed: {SEND_SYS_FLAG_BITS:#x})",
        )
    return None


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
