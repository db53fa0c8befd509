"""``config/topics.json``: the topic table (RocketMQ ``TopicConfigManager``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from mqcluster.common.javaints import INT32_MAX
from mqcluster.store.json_config import TableEntry, VersionedTable

PERM_PRIORITY = 0x8
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1
PERM_BITS = PERM_PRIORITY | PERM_READ | PERM_WRITE | PERM_INHERIT


@dataclass
class TopicConfig(TableEntry):
    topicName: str
    readQueueNums: int = 16
    writeQueueNums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topicFilterType: str = "SINGLE_TAG"
    topicSysFlag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)

    def problem(self) -> str | None:
        """What makes this config unfit to keep (RocketMQ's ranges), or None."""
        for key, value in (("readQueueNums", self.readQueueNums),
                           ("writeQueueNums", self.writeQueueNums)):
            if not 0 <= value <= INT32_MAX:
                return f"{key}={value} is outside 0..{INT32_MAX}"
        if not 0 <= self.perm <= PERM_BITS:
            return f"perm={self.perm} is outside 0..{PERM_BITS}"
        if not 0 <= self.topicSysFlag <= INT32_MAX:
            return f"topicSysFlag={self.topicSysFlag} is outside 0..{INT32_MAX}"
        return None

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)


class TopicConfigManager(VersionedTable[TopicConfig]):
    """Topic table; every change is persisted before the call returns."""

    file_name = "topics.json"
    table_key = "topicConfigTable"
    name_field = "topicName"
    entry_type = TopicConfig

    def put(self, entry: TopicConfig) -> None:
        """Keep ``entry``; a config out of RocketMQ's ranges is a ValueError, never saved."""
        problem = entry.problem()
        if problem is not None:
            raise ValueError(f"topic {entry.topicName!r}: {problem}")
        super().put(entry)

    def create_if_absent(self, topic: str, queue_nums: int = 4, perm: int = 6) -> TopicConfig:
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        config = TopicConfig(topic, queue_nums, queue_nums, perm)
        self.put(config)
        return config
