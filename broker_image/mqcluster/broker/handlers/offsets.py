"""Consumer offsets (14, 15) and queue offsets (29 SEARCH_OFFSET_BY_TIMESTAMP, 30, 31)."""

from __future__ import annotations

from mqcluster.broker.context import BrokerContext
from mqcluster.broker.request_checks import names_rejection
from mqcluster.protocol.broker import (
    BrokerResponseCode,
    GetMaxOffsetRequestHeader,
    QueryConsumerOffsetRequestHeader,
    RequestCode,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.rpc import Connection, HandlerRegistry


class OffsetHandlers:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def register(self, registry: HandlerRegistry) -> None:
        registry.register(RequestCode.QUERY_CONSUMER_OFFSET, self.query_consumer_offset)
        registry.register(RequestCode.UPDATE_CONSUMER_OFFSET, self.update_consumer_offset)
        registry.register(RequestCode.GET_MAX_OFFSET, self.max_offset)
        registry.register(RequestCode.GET_MIN_OFFSET, self.min_offset)
        registry.register(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, self.search_offset)

    async def query_consumer_offset(
        self, cmd: RemotingCommand, conn: Connection
    ) -> RemotingCommand:
        h = QueryConsumerOffsetRequestHeader.from_ext(cmd.ext_fields)
        bad = names_rejection(h.topic, h.consumerGroup)
        if bad is not None:
            return cmd.response(bad.code, remark=bad.remark)
        offset = self.ctx.store.offsets.query(h.consumerGroup, h.topic, h.queueId)
        if offset >= 0:
            return cmd.response(ext_fields={"offset": offset})
        if h.setZeroIfNotFound:
            return cmd.response(ext_fields={"offset": 0})
        return cmd.response(
            BrokerResponseCode.QUERY_NOT_FOUND,
            remark=f"group {h.consumerGroup!r} has no offset for {h.topic}:{h.queueId}",
        )

    async def update_consumer_offset(
        self, cmd: RemotingCommand, conn: Connection
    ) -> RemotingCommand:
        h = UpdateConsumerOffsetRequestHeader.from_ext(cmd.ext_fields)
        bad = names_rejection(h.topic, h.consumerGroup)
        if bad is not None:
            return cmd.response(bad.code, remark=bad.remark)
        topic = self.ctx.store.topics.get(h.topic)
        if topic is None:
            return cmd.response(
                BrokerResponseCode.TOPIC_NOT_EXIST, remark=f"topic {h.topic!r} does not exist"
            )
        queues = max(topic.readQueueNums, topic.writeQueueNums)
        if h.queueId >= queues:
            return cmd.response(
                BrokerResponseCode.INVALID_REQUEST,
                remark=f"queueId={h.queueId} is illegal: topic {h.topic!r} has {queues} queues",
            )
        self.ctx.store.offsets.commit(h.consumerGroup, h.topic, h.queueId, h.commitOffset)
        return cmd.response()

    async def max_offset(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = GetMaxOffsetRequestHeader.from_ext(cmd.ext_fields)
        return cmd.response(ext_fields={"offset": self.ctx.store.max_offset(h.topic, h.queueId)})

    async def min_offset(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = GetMaxOffsetRequestHeader.from_ext(cmd.ext_fields)
        return cmd.response(ext_fields={"offset": self.ctx.store.min_offset(h.topic, h.queueId)})

    async def search_offset(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = SearchOffsetRequestHeader.from_ext(cmd.ext_fields)
        offset = self.ctx.store.offset_by_time(h.topic, h.queueId, h.timestamp)
        return cmd.response(ext_fields={"offset": offset})
