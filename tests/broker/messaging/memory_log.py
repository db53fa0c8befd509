"""An in-memory stand-in for ``MessageStore`` with the surface the message service uses."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mqcluster.protocol.properties import PROPERTY_UNIQ_KEY
from mqcluster.store.consumer_offset import ConsumerOffsetManager
from mqcluster.store.filter import MessageFilter, TagFilter
from mqcluster.store.message import (
    GetResult,
    GetStatus,
    MessageRecord,
    PutResult,
    PutStatus,
    StoredMessage,
)
from mqcluster.store.subscription_group import SubscriptionGroupManager
from mqcluster.store.topic_config import TopicConfigManager


class MemoryLog:
    def __init__(self, config_dir: str, clock_ms: Callable[[], int] = lambda: 0) -> None:
        self.topics = TopicConfigManager(config_dir)
        self.subscriptions = SubscriptionGroupManager(config_dir)
        self.offsets = ConsumerOffsetManager(config_dir)
        self.queues: dict[tuple[str, int], list[StoredMessage]] = {}
        self.listeners: list[Callable[[str, int, int], None]] = []
        self.clock_ms = clock_ms
        self.fail_next: PutStatus | None = None
        self._commitlog = 0

    async def put_message(self, rec: MessageRecord) -> PutResult:
        if self.fail_next is not None:
            status, self.fail_next = self.fail_next, None
            return PutResult(status)
        q = self.queues.setdefault((rec.topic, rec.queue_id), [])
        offset = len(q)
        msg_id = rec.properties.get(PROPERTY_UNIQ_KEY) or f"OFFSET{self._commitlog:016X}"
        stored = StoredMessage(
            topic=rec.topic,
            queue_id=rec.queue_id,
            body=rec.body,
            tags=rec.tags,
            keys=list(rec.keys),
            properties=dict(rec.properties),
            born_timestamp=rec.born_timestamp,
            born_host=rec.born_host,
            flag=rec.flag,
            sys_flag=rec.sys_flag,
            reconsume_times=rec.reconsume_times,
            msg_id=msg_id,
            queue_offset=offset,
            commitlog_offset=self._commitlog,
            store_size=100 + len(rec.body),
            store_timestamp=self.clock_ms(),
            store_host="127.0.0.1:10911",
        )
        self._commitlog += stored.store_size
        q.append(stored)
        for listener in list(self.listeners):
            listener(rec.topic, rec.queue_id, offset + 1)
        return PutResult(
            PutStatus.PUT_OK,
            msg_id=msg_id,
            queue_offset=offset,
            commitlog_offset=stored.commitlog_offset,
            store_size=stored.store_size,
            store_timestamp=stored.store_timestamp,
        )

    async def put_messages(self, recs: Sequence[MessageRecord]) -> list[PutResult]:
        return [await self.put_message(r) for r in recs]

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int = 32,
        filter: MessageFilter | None = None,
    ) -> GetResult:
        q = self.queues.get((topic, queue_id))
        if not q:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, next_offset=0)
        if offset >= len(q):
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, next_offset=offset, max_offset=len(q))
        out: list[StoredMessage] = []
        pos = offset
        while pos < len(q) and len(out) < max_count:
            m = q[pos]
            pos += 1
            if (
                filter is None
                or (isinstance(filter, TagFilter) and filter(m))
                or (callable(filter) and not isinstance(filter, TagFilter) and filter(m))
            ):
                out.append(m)
        status = GetStatus.FOUND if out else GetStatus.NO_MATCHED_MESSAGE
        return GetResult(status, out, next_offset=pos, min_offset=0, max_offset=len(q))

    def get_message_by_offset(self, commitlog_offset: int) -> StoredMessage | None:
        for q in self.queues.values():
            for m in q:
                if m.commitlog_offset == commitlog_offset:
                    return m
        return None

    def min_offset(self, topic: str, queue_id: int) -> int:
        return 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        return len(self.queues.get((topic, queue_id), []))

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        q = self.queues.get((topic, queue_id), [])
        for m in q:
            if m.store_timestamp >= timestamp_ms:
                return m.queue_offset
        return len(q)

    def add_arrival_listener(self, listener: Callable[[str, int, int], None]) -> None:
        self.listeners.append(listener)

    def bodies(self, topic: str, queue_id: int = 0) -> list[bytes]:
        return [m.body for m in self.queues.get((topic, queue_id), [])]
