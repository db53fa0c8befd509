"""Commitlog store, consume queues, checkpoint, epoch file and the config JSON files.

On-disk layout under ``storePathRootDir`` (as RocketMQ's):

    commitlog/<20-digit start offset>      fixed-size segments of message records
    consumequeue/<topic>/<queueId>/<20-digit byte offset>   20-byte entries
    consumequeue/queues.json              which consume queues exist (rebuild detection)
    config/topics.json, subscriptionGroup.json, consumerOffset.json (+ .bak)
    checkpoint                             flushed offsets and timestamps
    storeLayout.json                       segment sizes the files were written with
    commitlog.damaged/<offset>-<time>      bytes recovery cut off after damage, kept
    epochFileCheckpoint                    controller-mode epochs (``epoch_file``)
    abort                                  present while the store is open
    lock                                   who has the store open (every directory the
                                           store writes is flocked: ``lockfile``)
"""

from mqcluster.store.api import MessageStore
from mqcluster.store.batch import BatchPutResult, RawBatch
from mqcluster.store.config import FlushDiskType, StoreConfig
from mqcluster.store.consumer_offset import ConsumerOffsetManager
from mqcluster.store.epoch_file import EpochEntry, EpochFileCache
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
    "EpochEntry",
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
