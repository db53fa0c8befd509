"""Commitlog store, consume queues, checkpoint, epoch file and the config JSON files.

The files under ``storePathRootDir`` (as RocketMQ's) and their layouts:
docs/formats.md, "Broker store".
"""

from mqcluster.store.api import MessageStore
from mqcluster.store.batch import BatchPutResult, RawBatch
from mqcluster.store.config import FlushDiskType, StoreConfig
from mqcluster.store.consumer_offset import ConsumerOffsetManager
from mqcluster.store.epoch_file import EpochFileCache
from mqcluster.store.errors import (
    SegmentSizeChangedError,
    StoreError,
    StoreLayoutError,
    StoreLockedError,
)
from mqcluster.store.filter import MessageFilter, TagFilter, tags_code
from mqcluster.store.message import (
    GetResult,
    GetStatus,
    MessageRecord,
    PutResult,
    PutStatus,
    StoredMessage,
)
from mqcluster.store.subscription_group import SubscriptionGroupConfig, SubscriptionGroupManager
from mqcluster.store.topic_config import TopicConfig, TopicConfigManager

__all__ = [
    "BatchPutResult",
    "ConsumerOffsetManager",
    "EpochFileCache",
    "FlushDiskType",
    "GetResult",
    "GetStatus",
    "MessageFilter",
    "MessageRecord",
    "MessageStore",
    "PutResult",
    "PutStatus",
    "RawBatch",
    "SegmentSizeChangedError",
    "StoreConfig",
    "StoreError",
    "StoreLayoutError",
    "StoreLockedError",
    "StoredMessage",
    "SubscriptionGroupConfig",
    "SubscriptionGroupManager",
    "TagFilter",
    "TopicConfig",
    "TopicConfigManager",
    "tags_code",
]
