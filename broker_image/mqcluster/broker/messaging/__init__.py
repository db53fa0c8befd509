"""The message service: send, pop-style receive, ack, redelivery, retry and dead-letter
topics, FIFO message groups, delayed and transactional messages (RocketMQ 5 semantics).

Pure bookkeeping (``queue_state``, ``receipt``, ``filter``) takes time as an argument;
the services take an injectable ``Clock``; ``MessagingService`` ties them together.
"""

from mqcluster.broker.messaging.clock import Clock, ManualClock, SystemClock
from mqcluster.broker.messaging.config import MessagingConfig
from mqcluster.broker.messaging.errors import Code, MessagingError
from mqcluster.broker.messaging.service import MessagingService

__all__ = [
    "Clock",
    "Code",
    "ManualClock",
    "MessagingConfig",
    "MessagingError",
    "MessagingService",
    "SystemClock",
]
