"""Admin requests served by a broker: codes and headers as RocketMQ names them.

The broker registers handlers for these codes; mqadmin builds the requests.
``GET_BROKER_EPOCH_CACHE`` (1007) belongs to the controller protocol
(RIP-44) and lives in :mod:`mqcluster.protocol.controller`.
"""

from __future__ import annotations

from enum import IntEnum

from mqcluster.protocol.namesrv import (
    DEFAULT_PERM,
    TopicConfig,
)
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.header import Header


class BrokerRequestCode(IntEnum):
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    GET_BROKER_RUNTIME_INFO = 28
    DELETE_TOPIC_IN_BROKER = 215


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
    return RemotingCommand.request(BrokerRequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())


def decode_update_topic(cmd: RemotingCommand) -> CreateTopicRequestHeader:
    """Parse the header on the broker side; a bad field raises FrameError naming it."""
    return CreateTopicRequestHeader.from_ext(cmd.ext_fields)
