"""Topic and subscription-group lookups, with RocketMQ's auto-creation rules."""

from __future__ import annotations

from collections.abc import Callable

from mqcluster.broker.messaging.access import ANONYMOUS, Caller, TopicAccess
from mqcluster.broker.messaging.config import MessagingConfig
from mqcluster.broker.messaging.errors import Code, MessagingError
from mqcluster.broker.messaging.naming import is_system_topic
from mqcluster.broker.messaging.store_port import MessageLog
from mqcluster.store.subscription_group import SubscriptionGroupConfig
from mqcluster.store.topic_config import PERM_READ, PERM_WRITE, TopicConfig


def _read_write() -> int:
    return PERM_READ | PERM_WRITE


def _always() -> bool:
    return True


class Catalog:
    """``broker_permission`` gives the broker's ``brokerPermission`` as it is now (it can
    change at run time): a topic's effective permission is its own ANDed with it, for
    sends, receives and the routes handed out, as RocketMQ registers it. ``access``
    holds those rules for sends and reads (``TopicAccess``); ``is_master`` says whether
    this broker takes writes now."""

    def __init__(self, log: MessageLog, config: MessagingConfig,
                 on_topic_created: Callable[[], None] | None = None,
                 broker_permission: Callable[[], int] = _read_write,
                 is_master: Callable[[], bool] = _always, where: str | None = None) -> None:
        self._log = log
        self._config = config
        self._on_topic_created = on_topic_created
        self.broker_permission = broker_permission
        self.access = TopicAccess(log.topics, lambda: config, groups=log.subscriptions,
                                  where=where or f"broker {config.brokerName}",
                                  broker_permission=broker_permission, is_master=is_master,
                                  on_created=on_topic_created)

    def perm(self, config: TopicConfig) -> int:
        return self.access.perm(config)

    def topic(self, name: str, *, create: bool = True) -> TopicConfig:
        """The topic's config; created with the default queue count when allowed."""
        found = self._log.topics.get(name)
        if found is not None:
            return found
        if not (create and self._config.autoCreateTopicEnable) or is_system_topic(name):
            raise MessagingError(Code.TOPIC_NOT_FOUND, f"topic {name!r} does not exist")
        return self.access.create(name)

    def system_topic(self, name: str, queue_nums: int = 1) -> TopicConfig:
        """Retry, dead-letter, schedule and transaction topics always exist on demand."""
        found = self._log.topics.get(name)
        if found is not None:
            return found
        created = self._log.topics.create_if_absent(name, queue_nums, PERM_READ | PERM_WRITE)
        if self._on_topic_created is not None:
            self._on_topic_created()
        return created

    def group(self, name: str, caller: Caller = ANONYMOUS) -> SubscriptionGroupConfig:
        """The group's config, auto-created when allowed; raises Refusal (the front end
        answers it with its own code) when it may not consume here."""
        return self.access.consuming_group(name, caller)

    def known_group(self, name: str) -> SubscriptionGroupConfig | None:
        return self._log.subscriptions.get(name)
