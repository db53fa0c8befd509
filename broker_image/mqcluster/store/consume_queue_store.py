"""All consume queues of a store, and the registry of which queues exist.

The registry (``consumequeue/queues.json``) lets recovery notice a consume queue whose
files were deleted, so it can be rebuilt from the commitlog.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator

from mqcluster.common.files import atomic_write, read_file
from mqcluster.store.consume_queue import ConsumeQueue

log = logging.getLogger(__name__)

REGISTRY = "queues.json"
QueueKey = tuple[str, int]


class ConsumeQueueStore:
    def __init__(self, root: str, file_size: int) -> None:
        self.root = root
        self.file_size = file_size
        self.queues: dict[QueueKey, ConsumeQueue] = {}
        self._registry_path = os.path.join(root, REGISTRY)
        self._registered: set[QueueKey] = set()
        self.size_recorded = False
        """The store's layout record vouches for ``file_size`` (``SegmentedFile``)."""

    def queue_dirs(self) -> Iterator[str]:
        """Every consume queue directory on disk (``<root>/<topic>/<queueId>``)."""
        if not os.path.isdir(self.root):
            return
        for topic in sorted(os.listdir(self.root)):
            topic_dir = os.path.join(self.root, topic)
            if os.path.isdir(topic_dir):
                for qid in sorted(os.listdir(topic_dir)):
                    if qid.isdigit():
                        yield os.path.join(topic_dir, qid)

    def load(self) -> bool:
        """Open every consume queue; ``False`` when one the registry lists is missing."""
        os.makedirs(self.root, exist_ok=True)
        for queue_dir in self.queue_dirs():
            topic_dir, qid = os.path.split(queue_dir)
            topic = os.path.basename(topic_dir)
            cq = ConsumeQueue(self.root, topic, int(qid), self.file_size)
            cq.files.size_recorded = self.size_recorded
            self.queues[(topic, int(qid))] = cq
            cq.load()
        raw = read_file(self._registry_path)
        self._registered = set()
        if raw is not None:
            try:
                self._registered = {(t, int(q)) for t, q in json.loads(raw)}
            except (ValueError, TypeError):
                log.error("consume queue registry %s is damaged", self._registry_path)
                raw = None
        complete = raw is not None
        for key in sorted(self._registered):
            cq_ = self.queues.get(key)
            if cq_ is None or cq_.files.empty:
                log.warning("consume queue %s-%d is missing; it will be rebuilt", *key)
                complete = False
        return complete

    def recover(self) -> None:
        for cq in self.queues.values():
            cq.recover()

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.queues.get((topic, queue_id))

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        cq = self.queues.get(key)
        if cq is None:
            cq = ConsumeQueue(self.root, topic, queue_id, self.file_size)
            self.queues[key] = cq
        return cq

    def register_new(self) -> None:
        """Record queues created since the last call (one file write for all of them)."""
        if not self._registered.issuperset(self.queues):
            self._registered |= set(self.queues)
            self._save_registry()

    def _save_registry(self) -> None:
        data = json.dumps(sorted([t, q] for t, q in self._registered)).encode()
        atomic_write(self._registry_path, data)

    def sync_registry(self) -> None:
        """Make the registry list exactly the queues that exist."""
        self._registered = set(self.queues)
        self._save_registry()

    def __iter__(self) -> Iterator[ConsumeQueue]:
        return iter(list(self.queues.values()))

    def truncate_dirty(self, commitlog_max: int) -> None:
        for cq in self:
            cq.truncate_dirty(commitlog_max)

    def correct_min_offsets(self, commitlog_min: int) -> None:
        for cq in self:
            cq.correct_min_offset(commitlog_min)

    def delete_expired(self, commitlog_min: int) -> int:
        return sum(cq.delete_expired(commitlog_min) for cq in self)

    def flush(self, fsync: Callable[[int], None]) -> None:
        for cq in self:
            if cq.dirty:
                cq.flush(fsync)

    def max_offsets(self) -> dict[QueueKey, int]:
        return {key: cq.max_offset for key, cq in self.queues.items()}

    def close(self) -> None:
        for cq in self:
            cq.close()
