"""``config/topics.json``: the topic table (RocketMQ ``TopicConfigManager``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from mqcluster.store.json_config import DataVersion, JsonConfigFile

PERM_PRIORITY = 0x8
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1


@dataclass
class TopicConfig:
    topicName: str
    readQueueNums: int = 16
    writeQueueNums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topicFilterType: str = "SINGLE_TAG"
    topicSysFlag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TopicConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


class TopicConfigManager(JsonConfigFile):
    """Topic table; every change is persisted before the call returns."""

    file_name = "topics.json"

    def __init__(self, config_dir: str, clock: Callable[[], float] = time.time) -> None:
        super().__init__(config_dir)
        self._clock = clock
        self.table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def put(self, config: TopicConfig) -> None:
        self.table[config.topicName] = config
        self._changed()

    def delete(self, topic: str) -> bool:
        if self.table.pop(topic, None) is None:
            return False
        self._changed()
        return True

    def create_if_absent(self, topic: str, queue_nums: int = 4, perm: int = 6) -> TopicConfig:
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        config = TopicConfig(topic, queue_nums, queue_nums, perm)
        self.put(config)
        return config

    def _changed(self) -> None:
        self.data_version.next(int(self._clock() * 1000))
        self.persist()

    def encode(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_dict(),
            "topicConfigTable": {name: c.to_dict() for name, c in sorted(self.table.items())},
        }

    def decode(self, data: dict[str, Any]) -> None:
        table = data.get("topicConfigTable") or {}
        self.table = {name: TopicConfig.from_dict({"topicName": name, **c})
                      for name, c in table.items()}
        self.data_version = DataVersion.from_dict(data.get("dataVersion"))
