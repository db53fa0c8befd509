"""Topic lookups for sends and pulls: name rules, auto-create, permissions."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from mqcluster.broker.context import BrokerContext
from mqcluster.broker.protocol import BrokerResponseCode
from mqcluster.store.topic_config import PERM_READ, PERM_WRITE, TopicConfig
from mqcluster.store.validation import group_name_problem, topic_name_problem

AUTO_CREATE_TOPIC_KEY = "TBW102"
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
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    @property
    def _where(self) -> str:
        return f"broker {self.ctx.broker_name} ({self.ctx.addresses.broker})"

    def for_write(
        self, topic: str, queue_nums_hint: int | None = None
    ) -> TopicConfig | TopicRejection:
        """The topic's config, auto-created when allowed, or why it cannot be written."""
        bad = check_topic_name(topic)
        if bad is not None:
            return bad
        if topic in SYSTEM_TOPICS:
            return TopicRejection(
                BrokerResponseCode.NO_PERMISSION, f"topic {topic!r} is a system topic"
            )
        if not self.ctx.role.is_master:
            return TopicRejection(
                BrokerResponseCode.SERVICE_NOT_AVAILABLE,
                f"{self._where} is a slave and does not accept messages",
            )
        if not self.ctx.config.brokerPermission & PERM_WRITE:
            return TopicRejection(
                BrokerResponseCode.NO_PERMISSION, f"{self._where} forbids writes (brokerPermission)"
            )
        cfg = self.ctx.store.topics.get(topic)
        if cfg is None:
            if not self.ctx.config.autoCreateTopicEnable:
                return TopicRejection(
                    BrokerResponseCode.TOPIC_NOT_EXIST,
                    f"topic {topic!r} does not exist on {self._where} and "
                    "autoCreateTopicEnable=false; create it first (mqadmin updateTopic)",
                )
            cfg = self.create(topic, queue_nums_hint)
        if not cfg.writable:
            return TopicRejection(
                BrokerResponseCode.NO_PERMISSION, f"topic {topic!r} is not writable (perm)"
            )
        return cfg

    def for_read(self, topic: str) -> TopicConfig | TopicRejection:
        if not self.ctx.config.brokerPermission & PERM_READ:
            return TopicRejection(
                BrokerResponseCode.NO_PERMISSION, f"{self._where} forbids reads (brokerPermission)"
            )
        cfg = self.ctx.store.topics.get(topic)
        if cfg is None:
            return TopicRejection(
                BrokerResponseCode.TOPIC_NOT_EXIST,
                f"topic {topic!r} does not exist on {self._where}",
            )
        if not cfg.readable:
            return TopicRejection(
                BrokerResponseCode.NO_PERMISSION, f"topic {topic!r} is not readable (perm)"
            )
        return cfg

    def create(self, topic: str, queue_nums_hint: int | None = None) -> TopicConfig:
        default = self.ctx.config.defaultTopicQueueNums
        nums = min(queue_nums_hint, default) if queue_nums_hint and queue_nums_hint > 0 else default
        cfg = self.ctx.store.topics.create_if_absent(topic, nums)
        self.ctx.topics_changed()
        return cfg

    def put(self, cfg: TopicConfig) -> None:
        self.ctx.store.topics.put(cfg)
        self.ctx.topics_changed()

    def delete(self, topic: str) -> bool:
        deleted = self.ctx.store.topics.delete(topic)
        if deleted:
            self.ctx.topics_changed()
        return deleted
