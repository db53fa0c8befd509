"""Store configuration, with RocketMQ's own key names (``MessageStoreConfig``)."""

from __future__ import annotations

import os
from enum import StrEnum

from mqcluster.common.config import RocketConfig

GiB = 1024 * 1024 * 1024
MiB = 1024 * 1024
CQ_UNIT_SIZE = 20


class FlushDiskType(StrEnum):
    SYNC_FLUSH = "SYNC_FLUSH"
    ASYNC_FLUSH = "ASYNC_FLUSH"


class StoreConfig(RocketConfig):
    """Times are in milliseconds unless the name says otherwise (``fileReservedTime``: hours)."""

    storePathRootDir: str = os.path.join(os.path.expanduser("~"), "store")
    storePathCommitLog: str | None = None
    storePathEpochFile: str | None = None
    storePathDLedgerCommitLog: str | None = None
    """DLedger mode: the Raft log directory, locked with the store's own (the broker sets it)."""
    mappedFileSizeCommitLog: int = GiB
    mappedFileSizeConsumeQueue: int = 300_000 * CQ_UNIT_SIZE
    flushDiskType: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    flushIntervalCommitLog: int = 500
    flushIntervalConsumeQueue: int = 1000
    flushConsumerOffsetInterval: int = 5000
    syncFlushTimeout: int = 5000
    maxMessageSize: int = 4 * MiB
    maxPropertiesSize: int = 32 * 1024
    fileReservedTime: float = 72
    deleteWhen: str = "04"
    cleanResourceInterval: int = 10_000
    diskMaxUsedSpaceRatio: int = 75
    diskSpaceCleanForciblyRatio: int = 85
    diskSpaceWarningLevelRatio: int = 90
    maxTransferBytesOnMessageInMemory: int = 256 * 1024
    maxFilterMessageCount: int = 16_000
    checkCRCOnRecover: bool = True
    brokerName: str = "broker-a"
    storeHost: str = "127.0.0.1:10911"

    @property
    def commitlog_dir(self) -> str:
        return self.storePathCommitLog or os.path.join(self.storePathRootDir, "commitlog")

    @property
    def consumequeue_dir(self) -> str:
        return os.path.join(self.storePathRootDir, "consumequeue")

    @property
    def config_dir(self) -> str:
        return os.path.join(self.storePathRootDir, "config")

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.storePathRootDir, "checkpoint")

    @property
    def abort_path(self) -> str:
        return os.path.join(self.storePathRootDir, "abort")

    @property
    def lock_path(self) -> str:
        return os.path.join(self.storePathRootDir, "lock")

    @property
    def epoch_file_path(self) -> str:
        return self.storePathEpochFile or os.path.join(self.storePathRootDir, "epochFileCheckpoint")

    @property
    def layout_path(self) -> str:
        """The segment sizes the files were written with (``store_layout``)."""
        return os.path.join(self.storePathRootDir, "storeLayout.json")

    @property
    def damaged_dir(self) -> str:
        """Where recovery moves what follows a damaged commitlog region."""
        return os.path.join(self.storePathRootDir, "commitlog.damaged")

    @property
    def locked_dirs(self) -> list[str]:
        """Every directory the store writes: no other store may use any of them."""
        dirs = [self.storePathRootDir, self.commitlog_dir, self.consumequeue_dir,
                self.config_dir]
        if self.storePathDLedgerCommitLog:
            dirs.append(self.storePathDLedgerCommitLog)
        return dirs
