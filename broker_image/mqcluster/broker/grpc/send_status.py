"""The gRPC endpoint's answers: an ``apache.rocketmq.v2.Code`` for each refusal of the
message service and each store status (remoting's are in ``broker/remoting_status.py``)."""

from __future__ import annotations

from mqcluster.broker.messaging.errors import Code, MessagingError
from mqcluster.broker.messaging.refusal import Reason, Refusal
from mqcluster.broker.messaging.send import SendOutcome
from mqcluster.store.message import PutStatus

REFUSAL_CODES: dict[Reason, Code] = {
    Reason.NO_MESSAGE: Code.BAD_REQUEST,
    Reason.ILLEGAL_TOPIC: Code.ILLEGAL_TOPIC,
    Reason.SYSTEM_TOPIC: Code.ILLEGAL_TOPIC,
    Reason.MESSAGE_BODY_EMPTY: Code.MESSAGE_BODY_EMPTY,
    Reason.MESSAGE_BODY_TOO_LARGE: Code.MESSAGE_BODY_TOO_LARGE,
    Reason.TRANSACTION_NOT_ON_THIS_PROTOCOL: Code.FORBIDDEN,
    Reason.ILLEGAL_SYS_FLAG: Code.BAD_REQUEST,
    Reason.ILLEGAL_QUEUE_ID: Code.BAD_REQUEST,
    Reason.ILLEGAL_MESSAGE_TAG: Code.ILLEGAL_MESSAGE_TAG,
    Reason.ILLEGAL_MESSAGE_KEY: Code.ILLEGAL_MESSAGE_KEY,
    Reason.ILLEGAL_MESSAGE_GROUP: Code.ILLEGAL_MESSAGE_GROUP,
    Reason.ILLEGAL_MESSAGE_ID: Code.ILLEGAL_MESSAGE_ID,
    Reason.ILLEGAL_MESSAGE_PROPERTY_KEY: Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
    Reason.ILLEGAL_TRACE_CONTEXT: Code.BAD_REQUEST,
    Reason.MESSAGE_PROPERTIES_TOO_LARGE: Code.MESSAGE_PROPERTIES_TOO_LARGE,
    Reason.ILLEGAL_DELIVERY_TIME: Code.ILLEGAL_DELIVERY_TIME,
    Reason.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE: Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
    Reason.NOT_MASTER: Code.HA_NOT_AVAILABLE,
    Reason.BROKER_NOT_WRITABLE: Code.FORBIDDEN,
    Reason.BROKER_NOT_READABLE: Code.FORBIDDEN,
    Reason.TOPIC_NOT_FOUND: Code.TOPIC_NOT_FOUND,
    Reason.TOPIC_NOT_WRITABLE: Code.FORBIDDEN,
    Reason.TOPIC_NOT_READABLE: Code.FORBIDDEN,
    Reason.ILLEGAL_CONSUMER_GROUP: Code.ILLEGAL_CONSUMER_GROUP,
    Reason.GROUP_NOT_FOUND: Code.CONSUMER_GROUP_NOT_FOUND,
    Reason.GROUP_NOT_CONSUMING: Code.FORBIDDEN,
    Reason.UNAUTHORIZED: Code.UNAUTHORIZED,
    Reason.UNSUPPORTED: Code.UNSUPPORTED,
}
"""How this front end answers each refusal of the message service (sends and reads)."""

PUT_FAILURES: dict[PutStatus, Code] = {
    PutStatus.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
    PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH: Code.HA_NOT_AVAILABLE,
    PutStatus.SERVICE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
    PutStatus.MESSAGE_ILLEGAL: Code.BAD_REQUEST,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: Code.MESSAGE_PROPERTIES_TOO_LARGE,
    PutStatus.OS_PAGE_CACHE_BUSY: Code.TOO_MANY_REQUESTS,
}
"""How this front end answers a store status other than PUT_OK (else INTERNAL_SERVER_ERROR)."""


def refusal_error(refusal: Refusal) -> MessagingError:
    return MessagingError(REFUSAL_CODES[refusal.reason], refusal.remark)


def send_error(outcome: SendOutcome) -> MessagingError | None:
    """The status a failed send is answered with; None when it was stored."""
    if outcome.refusal is not None:
        return refusal_error(outcome.refusal)
    if outcome.ok:
        return None
    status = outcome.status
    detail = f": {outcome.remark}" if outcome.remark else ""
    return MessagingError(PUT_FAILURES.get(status, Code.INTERNAL_SERVER_ERROR),
                          f"store refused the message ({status.value}){detail}")
