"""What the message service needs from the store: ``mqcluster.store.api.MessageStore`` fits."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from mqcluster.store.batch import BatchPutResult, RawBatch
from mqcluster.store.consumer_offset import ConsumerOffsetManager
from mqcluster.store.filter import MessageFilter
from mqcluster.store.message import GetResult, MessageRecord, PutResult, StoredMessage
from mqcluster.store.subscription_group import SubscriptionGroupManager
from mqcluster.store.topic_config import TopicConfigManager


class MessageLog(Protocol):
    topics: TopicConfigManager
    subscriptions: SubscriptionGroupManager
    offsets: ConsumerOffsetManager

    async def put_message(self, rec: MessageRecord) -> PutResult: ...

    async def put_messages(self, recs: Sequence[MessageRecord]) -> list[PutResult]: ...

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int = 32,
        filter: MessageFilter | None = None,
    ) -> GetResult: ...

    def get_message_by_offset(self, commitlog_offset: int) -> StoredMessage | None: ...

    def min_offset(self, topic: str, queue_id: int) -> int: ...

    def max_offset(self, topic: str, queue_id: int) -> int: ...

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int: ...

    def add_arrival_listener(self, listener: Callable[[str, int, int], None]) -> None: ...


class StoreHost(Protocol):
    @property
    def storeHost(self) -> str: ...


class BatchLog(Protocol):
    """The real store's batched writes (``MessageStore`` fits): the remoting front end's
    encoded batches, and the wait until a write is visible to pulls."""

    @property
    def confirm_offset(self) -> int | None: ...

    @property
    def config(self) -> StoreHost: ...

    async def put_batches(self, batches: Sequence[RawBatch]) -> list[BatchPutResult]: ...

    async def wait_dispatched(self, commitlog_offset: int | None = None) -> None: ...
