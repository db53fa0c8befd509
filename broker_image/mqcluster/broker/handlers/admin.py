"""Topic and group admin (17, 21, 215, 200, 201, 207) and GET_BROKER_RUNTIME_INFO (28)."""

from __future__ import annotations

import json

from pydantic import ValidationError

from mqcluster.broker.context import BrokerContext
from mqcluster.broker.request_checks import perm_problem
from mqcluster.broker.runtime_info import runtime_table
from mqcluster.broker.topic_service import (
    SYSTEM_TOPICS,
    TopicService,
    check_group_name,
    check_topic_name,
)
from mqcluster.common.javaints import INT32_MAX
from mqcluster.protocol.broker import (
    BrokerResponseCode,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    RequestCode,
    SubscriptionGroupConfig,
    decode_update_topic,
)
from mqcluster.store.subscription_group import SubscriptionGroupConfig as StoredGroup
from mqcluster.store.topic_config import TopicConfig
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.rpc import Connection, HandlerRegistry


def _json(data: object) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode("utf-8")


class AdminHandlers:
    def __init__(self, ctx: BrokerContext, topics: TopicService) -> None:
        self.ctx = ctx
        self.topics = topics

    def register(self, registry: HandlerRegistry) -> None:
        registry.register(RequestCode.UPDATE_AND_CREATE_TOPIC, self.create_topic)
        registry.register(RequestCode.GET_ALL_TOPIC_CONFIG, self.all_topics)
        registry.register(RequestCode.DELETE_TOPIC_IN_BROKER, self.delete_topic)
        registry.register(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, self.create_group)
        registry.register(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, self.all_groups)
        registry.register(RequestCode.DELETE_SUBSCRIPTIONGROUP, self.delete_group)
        registry.register(RequestCode.GET_BROKER_RUNTIME_INFO, self.runtime_info)

    async def create_topic(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = decode_update_topic(cmd)
        bad = check_topic_name(h.topic)
        if bad is not None:
            return cmd.response(bad.code, remark=bad.remark)
        if h.topic in SYSTEM_TOPICS:
            return cmd.response(
                BrokerResponseCode.NO_PERMISSION, remark=f"topic {h.topic!r} is a system topic"
            )
        problem = perm_problem(h.perm)
        if problem is None and not 0 <= h.topicSysFlag <= INT32_MAX:
            problem = f"topicSysFlag={h.topicSysFlag} is outside 0..{INT32_MAX}"
        if problem is not None:
            return cmd.response(BrokerResponseCode.INVALID_REQUEST, remark=problem)
        limit = self.ctx.config.maxTopicQueueNums
        sizes = (("readQueueNums", h.readQueueNums), ("writeQueueNums", h.writeQueueNums))
        for key, value in sizes:
            if not 1 <= value <= limit:
                return cmd.response(
                    BrokerResponseCode.INVALID_REQUEST,
                    remark=f"{key}={value} is outside 1..{limit} (maxTopicQueueNums)",
                )
        self.topics.put(
            TopicConfig(
                topicName=h.topic,
                readQueueNums=h.readQueueNums,
                writeQueueNums=h.writeQueueNums,
                perm=h.perm,
                topicFilterType=h.topicFilterType,
                topicSysFlag=h.topicSysFlag,
                order=h.order,
            )
        )
        await self.ctx.topics_published()
        return cmd.response()

    async def all_topics(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response(body=_json(self.ctx.store.topics.encode()))

    async def delete_topic(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = DeleteTopicRequestHeader.from_ext(cmd.ext_fields)
        self.topics.delete(h.topic)
        for group in self.ctx.store.offsets.groups_of_topic(h.topic):
            self.ctx.store.offsets.remove_group(group, h.topic)
        await self.ctx.topics_published()
        return cmd.response()

    async def create_group(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        try:
            body = SubscriptionGroupConfig.model_validate_json(cmd.body or b"{}")
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "body"
            return cmd.response(BrokerResponseCode.INVALID_REQUEST,
                                remark=f"bad subscription group {where}: {err['msg']}")
        bad = check_group_name(body.groupName)
        if bad is not None:
            return cmd.response(bad.code, remark=f"groupName: {bad.remark}")
        self.ctx.store.subscriptions.put(StoredGroup.from_dict(body.model_dump()))
        return cmd.response()

    async def all_groups(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response(body=_json(self.ctx.store.subscriptions.encode()))

    async def delete_group(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = DeleteSubscriptionGroupRequestHeader.from_ext(cmd.ext_fields)
        self.ctx.store.subscriptions.delete(h.groupName)
        self.ctx.store.offsets.remove_group(h.groupName)
        return cmd.response()

    async def runtime_info(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response(body=_json({"table": runtime_table(self.ctx)}))
