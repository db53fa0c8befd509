"""The remoting front end's answers: a RocketMQ response code for each refusal of the
message service and each store status (the gRPC endpoint's are in ``grpc/send_status.py``)."""

from __future__ import annotations

from mqcluster.broker.messaging.refusal import Reason
from mqcluster.protocol.broker import BrokerResponseCode
from mqcluster.store.message import PutStatus

R = BrokerResponseCode
REFUSAL_CODES: dict[Reason, int] = {
    Reason.NO_MESSAGE: R.MESSAGE_ILLEGAL,
    Reason.ILLEGAL_TOPIC: R.MESSAGE_ILLEGAL,
    Reason.SYSTEM_TOPIC: R.NO_PERMISSION,
    Reason.MESSAGE_BODY_EMPTY: R.MESSAGE_ILLEGAL,
    Reason.MESSAGE_BODY_TOO_LARGE: R.MESSAGE_ILLEGAL,
    Reason.TRANSACTION_NOT_ON_THIS_PROTOCOL: R.NO_PERMISSION,
    Reason.ILLEGAL_SYS_FLAG: R.INVALID_REQUEST,
    Reason.ILLEGAL_QUEUE_ID: R.INVALID_REQUEST,
    Reason.ILLEGAL_MESSAGE_TAG: R.MESSAGE_ILLEGAL,
    Reason.ILLEGAL_MESSAGE_KEY: R.MESSAGE_ILLEGAL,
    Reason.ILLEGAL_MESSAGE_GROUP: R.MESSAGE_ILLEGAL,
    Reason.ILLEGAL_MESSAGE_ID: R.MESSAGE_ILLEGAL,
    Reason.ILLEGAL_MESSAGE_PROPERTY_KEY: R.MESSAGE_ILLEGAL,
    Reason.ILLEGAL_TRACE_CONTEXT: R.MESSAGE_ILLEGAL,
    Reason.MESSAGE_PROPERTIES_TOO_LARGE: R.MESSAGE_ILLEGAL,
    Reason.ILLEGAL_DELIVERY_TIME: R.MESSAGE_ILLEGAL,
    Reason.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE: R.MESSAGE_ILLEGAL,
    Reason.NOT_MASTER: R.SERVICE_NOT_AVAILABLE,
    Reason.BROKER_NOT_WRITABLE: R.NO_PERMISSION,
    Reason.BROKER_NOT_READABLE: R.NO_PERMISSION,
    Reason.TOPIC_NOT_FOUND: R.TOPIC_NOT_EXIST,
    Reason.TOPIC_NOT_WRITABLE: R.NO_PERMISSION,
    Reason.TOPIC_NOT_READABLE: R.NO_PERMISSION,
    Reason.UNAUTHORIZED: R.NO_PERMISSION,
    Reason.UNSUPPORTED: R.REQUEST_CODE_NOT_SUPPORTED,
}
"""How this front end answers each refusal of the message service."""

PUT_STATUS_CODES: dict[PutStatus, int] = {
    PutStatus.PUT_OK: R.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: R.FLUSH_DISK_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: R.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: R.SLAVE_NOT_AVAILABLE,
    PutStatus.SERVICE_NOT_AVAILABLE: R.SERVICE_NOT_AVAILABLE,
    PutStatus.CREATE_MAPPED_FILE_FAILED: R.SYSTEM_ERROR,
    PutStatus.MESSAGE_ILLEGAL: R.MESSAGE_ILLEGAL,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: R.MESSAGE_ILLEGAL,
    PutStatus.OS_PAGE_CACHE_BUSY: R.SYSTEM_BUSY,
    PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH: R.SYSTEM_ERROR,
    PutStatus.UNKNOWN_ERROR: R.SYSTEM_ERROR,
}
"""How this front end answers each store status."""
