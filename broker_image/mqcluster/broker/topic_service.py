"""Topic lookups for sends and pulls: name rules, auto-create, permissions."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from mqcluster.broker.context import BrokerContext
from mqcluster.broker.messaging.access import TopicAccess
from mqcluster.broker.messaging.naming import AUTO_CREATE_TOPIC_KEY
from mqcluster.protocol.broker import BrokerResponseCode
from mqcluster.protocol.names import group_name_problem, topic_name_problem
from mqcluster.store.topic_config import TopicConfig

SYSTEM_TOPICS = frozenset({AUTO_CREATE_TOPIC_KEY})


@dataclass(frozen=True)
class TopicRejection:
    """Why a topic cannot be used: a RocketMQ response code and a clear remark."""

    code: int
    remark: str


def check_topic_name(topic: str) -> TopicRejection | None:
    problem = topic_name_problem(topic)
    return None if problem is None else _rejection(problem)


@functools.lru_cache(maxsize=256)  # (rejections are frozen; the same few bad names recur)
def _rejection(problem: str) -> TopicRejection:
    return TopicRejection(BrokerResponseCode.MESSAGE_ILLEGAL, problem)


def check_group_name(group: str, what: str = "consumer group") -> TopicRejection | None:
    problem = group_name_problem(group, what)
    return None if problem is None else TopicRejection(BrokerResponseCode.INVALID_REQUEST, problem)


class TopicService:
    """The remoting front end's topic table: lookups and auto-creation under the broker's
    rules (``access``, shared with the message service), and the admin's changes."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.access = TopicAccess(
            ctx.store.topics, lambda: ctx.config, groups=ctx.store.subscriptions,
            where=f"broker {ctx.broker_name} ({ctx.addresses.broker})",
            broker_permission=lambda: ctx.config.brokerPermission,
            is_master=lambda: ctx.role.is_master, on_created=ctx.topics_changed)

    def create(self, topic: str, queue_nums_hint: int | None = None) -> TopicConfig:
        return self.access.create(topic, queue_nums_hint)

    def put(self, cfg: TopicConfig) -> None:
        self.ctx.store.topics.put(cfg)
        self.ctx.topics_changed()

    def delete(self, topic: str) -> bool:
        deleted = self.ctx.store.topics.delete(topic)
        if deleted:
            self.ctx.topics_changed()
        return deleted
