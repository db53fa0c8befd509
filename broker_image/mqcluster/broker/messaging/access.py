"""Who may do what, and the topic and group lookups of sends and reads, for every front end.

``authorize`` checks a caller's authenticated user against the resource and action
(RocketMQ ACL 2.0, ``mqcluster.auth``) when the front end that authenticated it hands
over its policies (``Caller.acl``); both the remoting handlers and the gRPC endpoint
reach it through ``TopicAccess``, which holds the permission rules of a broker: its
role, ``brokerPermission``, the topic's own perm, a group's ``consumeEnable``, and
auto-creation. (Each front end also checks every request at its entry against
``mqcluster.auth.table``, admin requests included.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

from mqcluster.auth.guard import Denied, Guard
from mqcluster.auth.model import Action, User
from mqcluster.auth.table import Right
from mqcluster.broker.messaging.refusal import Reason, Refusal
from mqcluster.protocol.names import group_name_problem
from mqcluster.store.subscription_group import SubscriptionGroupConfig, SubscriptionGroupManager
from mqcluster.store.topic_config import PERM_READ, PERM_WRITE, TopicConfig, TopicConfigManager


class Caller(NamedTuple):
    """Who sent a request: a client id or producer group, the peer's address, and the
    user its front end authenticated with the policies to check it against (None
    where ACL 2.0 is off). (Tuples: one is made for every request.)"""

    identity: str = ""
    address: str = ""
    user: User | None = None
    acl: Guard | None = None


class Resource(NamedTuple):
    """``kind`` is ``Topic`` or ``Group``, as in ACL 2.0's resource names."""

    kind: str
    name: str


ANONYMOUS = Caller()


def authorize(caller: Caller, resource: Resource, action: Action) -> None:
    """Raise ``Refusal(UNAUTHORIZED, ...)`` naming the missing right when ``caller``'s
    user may not do ``action`` on ``resource`` (source IP ranges against its address)."""
    if caller.acl is None:
        return
    try:
        caller.acl.authorize(caller.user, (Right(resource.kind, resource.name, (action,)),),
                             caller.address or None)
    except Denied as exc:
        raise Refusal(Reason.UNAUTHORIZED, str(exc)) from None


Authorizer = Callable[[Caller, Resource, Action], None]


def check_read_queue(queue_id: int, topic: TopicConfig, *, any_queue: bool = False) -> None:
    """``queue_id`` is one of the topic's read queues (or -1, "any", where allowed)."""
    if not (0 <= queue_id < topic.readQueueNums or (any_queue and queue_id == -1)):
        raise Refusal(
            Reason.ILLEGAL_QUEUE_ID,
            f"queueId={queue_id} is illegal: topic {topic.topicName!r} has "
            f"{topic.readQueueNums} read queues",
        )


class TopicSettings(Protocol):
    """The keys read on every lookup (``BrokerConfig`` and ``MessagingConfig`` fit)."""

    autoCreateTopicEnable: bool
    autoCreateSubscriptionGroup: bool
    defaultTopicQueueNums: int


def _read_write() -> int:
    return PERM_READ | PERM_WRITE


def _always() -> bool:
    return True


class TopicAccess:
    """``settings``, ``broker_permission`` and ``is_master`` are read on every call (a
    runtime config change or a failover changes them); ``where`` names the broker in
    remarks; ``on_created`` is told when a topic was auto-created; ``authorizer`` is
    asked first on every lookup (``authorize``)."""

    def __init__(self, topics: TopicConfigManager, settings: Callable[[], TopicSettings], *,
                 where: str, groups: SubscriptionGroupManager | None = None,
                 broker_permission: Callable[[], int] = _read_write,
                 is_master: Callable[[], bool] = _always,
                 on_created: Callable[[], None] | None = None,
                 authorizer: Authorizer = authorize) -> None:
        self.topics = topics
        self.groups = groups
        self.settings = settings
        self.where = where
        self.broker_permission = broker_permission
        self.is_master = is_master
        self.on_created = on_created
        self.authorize = authorizer

    def for_write(self, topic: str, caller: Caller = ANONYMOUS,
                  queue_nums_hint: int | None = None) -> TopicConfig:
        """The topic's config, auto-created when allowed; a Refusal when it cannot be
        written here. The name was checked before (``send_checks.check_send_topic``)."""
        self.authorize(caller, Resource("Topic", topic), Action.PUB)
        if not self.is_master():
            raise Refusal(Reason.NOT_MASTER,
                          f"{self.where} is a slave and does not accept messages")
        if not self.broker_permission() & PERM_WRITE:
            raise Refusal(Reason.BROKER_NOT_WRITABLE,
                          f"{self.where} forbids writes (brokerPermission)")
        cfg = self.topics.get(topic)
        if cfg is None:
            if not self.settings().autoCreateTopicEnable:
                raise Refusal(
                    Reason.TOPIC_NOT_FOUND,
                    f"topic {topic!r} does not exist on {self.where} and "
                    "autoCreateTopicEnable=false; create it first (mqadmin updateTopic)")
            cfg = self.create(topic, queue_nums_hint)
        if not cfg.writable:
            raise Refusal(Reason.TOPIC_NOT_WRITABLE, f"topic {topic!r} is not writable (perm)")
        return cfg

    def for_read(self, topic: str, caller: Caller = ANONYMOUS) -> TopicConfig:
        """The topic's config; a Refusal when it cannot be read here."""
        self.authorize(caller, Resource("Topic", topic), Action.SUB)
        if not self.broker_permission() & PERM_READ:
            raise Refusal(Reason.BROKER_NOT_READABLE,
                          f"{self.where} forbids reads (brokerPermission)")
        cfg = self.topics.get(topic)
        if cfg is None:
            raise Refusal(Reason.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist on {self.where}")
        if not cfg.readable:
            raise Refusal(Reason.TOPIC_NOT_READABLE, f"topic {topic!r} is not readable (perm)")
        return cfg

    def consuming_group(self, group: str, caller: Caller = ANONYMOUS) -> SubscriptionGroupConfig:
        """The consumer group's config, auto-created when allowed; a Refusal when the
        name breaks the rules, the group is unknown, or it may not consume."""
        assert self.groups is not None, "group lookups need the subscription group table"
        problem = group_name_problem(group)
        if problem is not None:
            raise Refusal(Reason.ILLEGAL_CONSUMER_GROUP, problem)
        self.authorize(caller, Resource("Group", group), Action.SUB)
        cfg = self.groups.get(group)
        if cfg is None:
            if not self.settings().autoCreateSubscriptionGroup:
                raise Refusal(Reason.GROUP_NOT_FOUND,
                              f"consumer group {group!r} does not exist and "
                              "autoCreateSubscriptionGroup=false")
            cfg = self.groups.create_if_absent(group)
        if not cfg.consumeEnable:
            raise Refusal(Reason.GROUP_NOT_CONSUMING,
                          f"consumer group {group!r} may not consume (consumeEnable=false)")
        return cfg

    def perm(self, cfg: TopicConfig) -> int:
        """A topic's effective permission: its own ANDed with ``brokerPermission``."""
        return cfg.perm & self.broker_permission()

    def create(self, topic: str, queue_nums_hint: int | None = None) -> TopicConfig:
        """Created with ``defaultTopicQueueNums`` queues, or fewer when the producer
        asked for fewer (remoting's ``defaultTopicQueueNums`` header)."""
        default = self.settings().defaultTopicQueueNums
        nums = min(queue_nums_hint, default) if queue_nums_hint and queue_nums_hint > 0 else default
        cfg = self.topics.create_if_absent(topic, nums, PERM_READ | PERM_WRITE)
        if self.on_created is not None:
            self.on_created()
        return cfg
