"""``config/subscriptionGroup.json``: consumer groups (RocketMQ ``SubscriptionGroupManager``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from mqcluster.store.json_config import DataVersion, JsonConfigFile


@dataclass
class SubscriptionGroupConfig:
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SubscriptionGroupConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


class SubscriptionGroupManager(JsonConfigFile):
    """Consumer group table; every change is persisted before the call returns."""

    file_name = "subscriptionGroup.json"

    def __init__(self, config_dir: str, clock: Callable[[], float] = time.time) -> None:
        super().__init__(config_dir)
        self._clock = clock
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = DataVersion()

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        return self.table.get(group)

    def put(self, config: SubscriptionGroupConfig) -> None:
        self.table[config.groupName] = config
        self._changed()

    def delete(self, group: str) -> bool:
        if self.table.pop(group, None) is None:
            return False
        self._changed()
        return True

    def create_if_absent(self, group: str) -> SubscriptionGroupConfig:
        existing = self.table.get(group)
        if existing is not None:
            return existing
        config = SubscriptionGroupConfig(group)
        self.put(config)
        return config

    def _changed(self) -> None:
        self.data_version.next(int(self._clock() * 1000))
        self.persist()

    def encode(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_dict(),
            "subscriptionGroupTable": {n: c.to_dict() for n, c in sorted(self.table.items())},
        }

    def decode(self, data: dict[str, Any]) -> None:
        table = data.get("subscriptionGroupTable") or {}
        self.table = {n: SubscriptionGroupConfig.from_dict({"groupName": n, **c})
                      for n, c in table.items()}
        self.data_version = DataVersion.from_dict(data.get("dataVersion"))
