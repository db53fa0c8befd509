"""Native asyncio client of the broker's internal protocol: producer, consumer, admin."""

from mqcluster.client.admin import AdminClient
from mqcluster.client.consumer import PullConsumer
from mqcluster.client.errors import BrokerError, ClientError
from mqcluster.client.message import Message, MessageQueue, PullResult, PullStatus, SendResult
from mqcluster.client.producer import Producer

__all__ = [
    "AdminClient",
    "BrokerError",
    "ClientError",
    "Message",
    "MessageQueue",
    "Producer",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "SendResult",
]
