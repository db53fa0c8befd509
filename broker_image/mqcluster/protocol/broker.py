"""Broker request/response codes and headers, as RocketMQ's remoting names them:
messaging (send, pull, offsets), topic and subscription-group admin, and operations
(broker config, consume stats, messages by offset, client connections).

Headers are ``extFields`` (:mod:`mqcluster.wire.header`: a bad field raises
HeaderError naming it, answered with INVALID_REQUEST). ``GET_BROKER_EPOCH_CACHE``
(1007) belongs to the controller protocol (RIP-44, :mod:`mqcluster.protocol.controller`);
the DLedger-mode requests to :mod:`mqcluster.protocol.dledger`.
"""

from __future__ import annotations

import re
from enum import IntEnum
from typing import Annotated

import msgspec
from pydantic import Field

from mqcluster.common.javaints import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from mqcluster.protocol.namesrv import DEFAULT_PERM, Model, TopicConfig
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.header import Header, renamed

__all__ = [
    "BrokerResponseCode",
    "CreateTopicRequestHeader",
    "DeleteTopicRequestHeader",
    "GetMaxOffsetRequestHeader",
    "PullMessageRequestHeader",
    "PullMessageResponseHeader",
    "QueryConsumerOffsetRequestHeader",
    "RequestCode",
    "SearchOffsetRequestHeader",
    "SendMessageRequestHeader",
    "SendMessageRequestHeaderV2",
    "SendMessageResponseHeader",
    "SubscriptionGroupConfig",
    "UpdateConsumerOffsetRequestHeader",
]


# Header field constraints, checked by ``from_ext``: Java's int and long ranges, queue
# ids and offsets never negative. (Names are checked by the handlers with the shared
# rules of ``mqcluster.store.validation``; the lengths here only bound what is kept.)
NonEmptyStr = Annotated[str, msgspec.Meta(min_length=1, max_length=255)]
NonEmptyStr127 = Annotated[str, msgspec.Meta(min_length=1, max_length=127)]
Int32 = Annotated[int, msgspec.Meta(ge=INT32_MIN, le=INT32_MAX)]
Int64 = Annotated[int, msgspec.Meta(ge=INT64_MIN, le=INT64_MAX)]
NonNegInt = Annotated[int, msgspec.Meta(ge=0, le=INT32_MAX)]
PositiveInt = Annotated[int, msgspec.Meta(ge=1, le=INT32_MAX)]
QueueId = Annotated[int, msgspec.Meta(ge=0, le=INT32_MAX)]
AnyQueueId = Annotated[int, msgspec.Meta(ge=-1, le=INT32_MAX)]
"""A send's queue id: -1 lets the broker choose."""
Offset = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]
Millis = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]


class RequestCode(IntEnum):
    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    VIEW_MESSAGE_BY_ID = 33
    GET_ALL_CONSUMER_OFFSET = 43
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    DELETE_TOPIC_IN_BROKER = 215
    SEND_MESSAGE_V2 = 310
    SEND_BATCH_MESSAGE = 320


class BrokerResponseCode(IntEnum):
    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    INVALID_REQUEST = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_GROUP_NOT_EXIST = 26


class SendMessageRequestHeader(Header):
    producerGroup: str = "DEFAULT_PRODUCER"
    topic: NonEmptyStr127
    defaultTopic: str = "TBW102"
    defaultTopicQueueNums: Int32 = 4
    queueId: AnyQueueId = -1
    sysFlag: Int32 = 0
    bornTimestamp: Millis = 0
    flag: Int32 = 0
    properties: str = ""
    reconsumeTimes: NonNegInt = 0
    unitMode: bool = False
    batch: bool = False
    maxReconsumeTimes: Int32 | None = None
    bname: str | None = None


_V2_NAMES = {
    "a": "producerGroup",
    "b": "topic",
    "c": "defaultTopic",
    "d": "defaultTopicQueueNums",
    "e": "queueId",
    "f": "sysFlag",
    "g": "bornTimestamp",
    "h": "flag",
    "i": "properties",
    "j": "reconsumeTimes",
    "k": "unitMode",
    "l": "maxReconsumeTimes",
    "m": "batch",
    "n": "bname",
}
_V1_NAMES = {v: k for k, v in _V2_NAMES.items()}


SendMessageRequestHeaderV2 = renamed(
    SendMessageRequestHeader, "SendMessageRequestHeaderV2", _V1_NAMES,
    "SEND_MESSAGE_V2's header: SEND_MESSAGE's fields under one-letter wire names.")


_V2_FIELD_IN_ERROR = re.compile(r"(?<=[:;] )([a-n])(?=: )")


def v2_field_names(problem: str) -> str:
    """A V2 header's error with each one-letter field also named: ``f (sysFlag): ...``."""
    return _V2_FIELD_IN_ERROR.sub(lambda m: f"{m.group(1)} ({_V2_NAMES[m.group(1)]})", problem)


def v1_to_v2(ext: dict[str, str]) -> dict[str, str]:
    return {_V1_NAMES.get(k, k): v for k, v in ext.items()}


class SendMessageResponseHeader(Header):
    """``msgId`` is the broker's offset message id; a batch's are comma separated, in order."""

    msgId: str
    queueId: int
    queueOffset: int
    transactionId: str | None = None
    batchUniqId: str | None = None


class PullMessageRequestHeader(Header):
    consumerGroup: NonEmptyStr
    topic: NonEmptyStr127
    queueId: QueueId
    queueOffset: Offset
    maxMsgNums: PositiveInt = 32
    sysFlag: Int32 = 0
    commitOffset: Annotated[int, msgspec.Meta(ge=-1, le=INT64_MAX)] = 0
    """-1 (a Java consumer with no offset yet) commits nothing."""
    suspendTimeoutMillis: Millis = 0
    subscription: str = "*"
    subVersion: Int64 = 0
    expressionType: str = "TAG"


class PullMessageResponseHeader(Header):
    suggestWhichBrokerId: int = 0
    nextBeginOffset: int
    minOffset: int
    maxOffset: int


class QueryConsumerOffsetRequestHeader(Header):
    consumerGroup: NonEmptyStr
    topic: NonEmptyStr127
    queueId: QueueId
    setZeroIfNotFound: bool = False


class UpdateConsumerOffsetRequestHeader(Header):
    consumerGroup: NonEmptyStr
    topic: NonEmptyStr127
    queueId: QueueId
    commitOffset: Offset


class GetMaxOffsetRequestHeader(Header):
    """Header of GET_MAX_OFFSET and GET_MIN_OFFSET."""

    topic: NonEmptyStr127
    queueId: QueueId


class SearchOffsetRequestHeader(Header):
    topic: NonEmptyStr127
    queueId: QueueId
    timestamp: Int64


class OffsetResponseHeader(Header):
    offset: int


class SubscriptionGroupConfig(Model):
    """Body of UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (JSON), RocketMQ's field names."""

    groupName: str = Field(min_length=1, max_length=255)
    consumeEnable: bool = True
    consumeFromMinEnable: bool = True
    consumeBroadcastEnable: bool = True
    consumeMessageOrderly: bool = False
    retryQueueNums: int = Field(default=1, ge=0, le=INT32_MAX)
    retryMaxTimes: int = Field(default=16, ge=-1, le=INT32_MAX)
    brokerId: int = Field(default=0, ge=0, le=INT64_MAX)
    whichBrokerWhenConsumeSlowly: int = Field(default=1, ge=0, le=INT64_MAX)
    notifyConsumerIdsChangedEnable: bool = True


class DeleteSubscriptionGroupRequestHeader(Header):
    groupName: NonEmptyStr


class CreateTopicRequestHeader(Header):
    """Header of UPDATE_AND_CREATE_TOPIC; creates the topic or replaces its config."""

    topic: str
    defaultTopic: str = "TBW102"
    readQueueNums: int = 8
    writeQueueNums: int = 8
    perm: int = DEFAULT_PERM
    topicFilterType: str = "SINGLE_TAG"
    topicSysFlag: int = 0
    order: bool = False
    attributes: str | None = None

    def to_topic_config(self) -> TopicConfig:
        return TopicConfig(
            topicName=self.topic,
            readQueueNums=self.readQueueNums,
            writeQueueNums=self.writeQueueNums,
            perm=self.perm,
            topicFilterType=self.topicFilterType,
            topicSysFlag=self.topicSysFlag,
            order=self.order,
        )


class DeleteTopicRequestHeader(Header):
    topic: str


def encode_update_topic(header: CreateTopicRequestHeader) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())


def decode_update_topic(cmd: RemotingCommand) -> CreateTopicRequestHeader:
    """Parse the header on the broker side; a bad field raises FrameError naming it."""
    return CreateTopicRequestHeader.from_ext(cmd.ext_fields)
