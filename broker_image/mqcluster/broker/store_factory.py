"""Builds the store's configuration from the broker's and opens the store."""

from __future__ import annotations

from pathlib import Path

from mqcluster.broker.config import BrokerConfig
from mqcluster.common.wallclock import wall_time
from mqcluster.store import FlushDiskType, MessageStore, StoreConfig
from mqcluster.store.fsync_seam import fsync_from_env


def store_config(cfg: BrokerConfig) -> StoreConfig:
    return StoreConfig(
        storePathRootDir=cfg.storePathRootDir,
        storePathCommitLog=str(cfg.commitlog_dir),
        storePathEpochFile=str(cfg.epoch_file),
        # DLedger mode: the Raft log is the store's too; its directory is locked with it.
        storePathDLedgerCommitLog=(
            cfg.storePathDLedgerCommitLog or str(Path(cfg.storePathRootDir) / "dledger")
        ) if cfg.enableDLegerCommitLog else None,
        mappedFileSizeCommitLog=cfg.mappedFileSizeCommitLog,
        mappedFileSizeConsumeQueue=cfg.mappedFileSizeConsumeQueue,
        flushDiskType=FlushDiskType(cfg.flushDiskType.value),
        flushIntervalCommitLog=cfg.flushIntervalCommitLog,
        flushIntervalConsumeQueue=cfg.flushIntervalConsumeQueue,
        syncFlushTimeout=cfg.syncFlushTimeout,
        maxMessageSize=cfg.maxMessageSize,
        fileReservedTime=cfg.fileReservedTime,
        deleteWhen=cfg.deleteWhen,
        diskMaxUsedSpaceRatio=cfg.diskMaxUsedSpaceRatio,
        brokerName=cfg.brokerName,
        storeHost=cfg.broker_addr,
    )


def create_store(cfg: BrokerConfig) -> MessageStore:
    # The fault seams: both are the plain system calls unless the chaos suite sets them.
    return MessageStore(store_config(cfg), clock=wall_time, fsync=fsync_from_env())
