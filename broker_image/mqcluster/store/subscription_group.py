"""``config/subscriptionGroup.json``: consumer groups (RocketMQ ``SubscriptionGroupManager``)."""

from __future__ import annotations

from dataclasses import dataclass, field

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


class SubscriptionGroupManager(VersionedTable[SubscriptionGroupConfig]):
    """Consumer group table; every change is persisted before the call returns."""

    file_name = "subscriptionGroup.json"
    table_key = "subscriptionGroupTable"
    name_field = "groupName"
    entry_type = SubscriptionGroupConfig

    def create_if_absent(self, group: str) -> SubscriptionGroupConfig:
        existing = self.table.get(group)
        if existing is not None:
            return existing
        config = SubscriptionGroupConfig(group)
        self.put(config)
        return config
