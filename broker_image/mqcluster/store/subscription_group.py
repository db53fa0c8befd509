"""``config/subscriptionGroup.json``: consumer groups (RocketMQ ``SubscriptionGroupManager``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from mqcluster.common.javaints import INT32_MAX
from mqcluster.store.json_config import TableEntry, VersionedTable


@dataclass
class SubscriptionGroupConfig(TableEntry):
    groupName: str
    consumeEnable: bool = True
    consumeFromMinEnable: bool = True
    consumeBroadcastEnable: bool = True
    consumeMessageOrderly: bool = False
    retryQueueNums: int = 1
    retryMaxTimes: int = 16
    brokerId: int = 0
    whichBrokerWhenConsumeSlowly: int = 1
    notifyConsumerIdsChangedEnable: bool = True
    groupSysFlag: int = 0
    consumeTimeoutMinute: int = 15
    attributes: dict[str, str] = field(default_factory=dict)


def group_problem(config: SubscriptionGroupConfig) -> str | None:
    """What makes a group config unfit to keep (RocketMQ's ranges), or None."""
    if not 0 <= config.retryQueueNums <= INT32_MAX:
        return f"retryQueueNums={config.retryQueueNums} is outside 0..{INT32_MAX}"
    if not -1 <= config.retryMaxTimes <= INT32_MAX:
        return f"retryMaxTimes={config.retryMaxTimes} is outside -1..{INT32_MAX}"
    if config.brokerId < 0 or config.whichBrokerWhenConsumeSlowly < 0:
        return "brokerId and whichBrokerWhenConsumeSlowly must not be negative"
    return None


class SubscriptionGroupManager(VersionedTable[SubscriptionGroupConfig]):
    """Consumer group table; every change is persisted before the call returns."""

    file_name = "subscriptionGroup.json"
    table_key = "subscriptionGroupTable"
    name_field = "groupName"
    entry_type = SubscriptionGroupConfig

    def put(self, entry: SubscriptionGroupConfig) -> None:
        """Keep ``entry``; a config out of RocketMQ's ranges is a ValueError, never saved."""
        problem = group_problem(entry)
        if problem is not None:
            raise ValueError(f"subscription group {entry.groupName!r}: {problem}")
        super().put(entry)

    def create_if_absent(self, group: str) -> SubscriptionGroupConfig:
        existing = self.table.get(group)
        if existing is not None:
            return existing
        config = SubscriptionGroupConfig(group)
        self.put(config)
        return config
