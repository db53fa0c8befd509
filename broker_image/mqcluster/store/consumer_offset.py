"""``config/consumerOffset.json``: committed consumer offsets (``ConsumerOffsetManager``).

Commits only change memory; the store persists the table every
``flushConsumerOffsetInterval`` and at shutdown, as RocketMQ does.
"""

from __future__ import annotations

import logging
from typing import Any

from mqcluster.common.javaints import INT32_MAX, INT64_MAX
from mqcluster.store.json_config import JsonConfigFile

log = logging.getLogger(__name__)

TOPIC_GROUP_SEPARATOR = "@"
MAX_QUEUE_ID = INT32_MAX
MAX_OFFSET = INT64_MAX


class ConsumerOffsetManager(JsonConfigFile):
    file_name = "consumerOffset.json"

    def __init__(self, config_dir: str) -> None:
        super().__init__(config_dir)
        self.table: dict[str, dict[int, int]] = {}
        self.dirty = False

    @staticmethod
    def key(group: str, topic: str) -> str:
        return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Remember an offset; a queue id or offset Java could not hold is a ValueError
        (the request handlers refuse them first: this keeps them out of the file)."""
        if not 0 <= queue_id <= MAX_QUEUE_ID:
            raise ValueError(f"queueId={queue_id} is outside 0..{MAX_QUEUE_ID}")
        if not 0 <= offset <= MAX_OFFSET:
            raise ValueError(f"offset={offset} is outside 0..{MAX_OFFSET}")
        self.table.setdefault(self.key(group, topic), {})[queue_id] = offset
        self.dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group never committed on this queue."""
        return self.table.get(self.key(group, topic), {}).get(queue_id, -1)

    def query_all(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.table.get(self.key(group, topic), {}))

    def groups_of_topic(self, topic: str) -> set[str]:
        prefix = topic + TOPIC_GROUP_SEPARATOR
        return {k[len(prefix):] for k in self.table if k.startswith(prefix)}

    def remove_group(self, group: str, topic: str | None = None) -> None:
        suffix = TOPIC_GROUP_SEPARATOR + group
        for k in [k for k in self.table if k.endswith(suffix)]:
            if topic is None or k == self.key(group, topic):
                del self.table[k]
                self.dirty = True

    def persist(self) -> None:
        self.dirty = False
        super().persist()

    def encode(self) -> dict[str, Any]:
        return {"offsetTable": {k: {str(q): o for q, o in sorted(v.items())}
                                for k, v in sorted(self.table.items())}}

    def decode(self, data: dict[str, Any]) -> None:
        table = data.get("offsetTable") or {}
        self.table = {}
        dropped: list[str] = []
        for k, v in table.items():
            kept = self.table.setdefault(k, {})
            for q, o in v.items():
                queue_id, offset = int(q), int(o)
                if 0 <= queue_id <= MAX_QUEUE_ID and 0 <= offset <= MAX_OFFSET:
                    kept[queue_id] = offset
                else:
                    dropped.append(f"{k}:{q}={o}")
        if dropped:  # (saved before requests were range-checked)
            log.warning("%s: dropped %d offsets out of range: %s", self.file_name,
                        len(dropped), ", ".join(dropped[:5]))
            self.dirty = True
