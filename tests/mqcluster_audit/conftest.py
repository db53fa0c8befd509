"""One local Spark session for every audit test, and stores written by the store itself."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from mqcluster.store import MessageStore, StoreConfig
from mqcluster.store.epoch_file import EpochFileCache
from mqcluster.store.message import MessageRecord, PutResult
from mqcluster_audit.sources import session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    s = session("local[2]", "mqaudit-tests")
    s.sparkContext.setLogLevel("ERROR")
    try:
        yield s
    finally:
        s.stop()


def write_store(root: Path, records: list[MessageRecord], *, confirm_after: int | None = None,
                epochs: list[tuple[int, int]] | None = None,
                offsets: dict[tuple[str, str, int], int] | None = None) -> list[PutResult]:
    """A store holding ``records``; its checkpoint names the end of record
    ``confirm_after`` as the confirm offset."""

    async def run() -> list[PutResult]:
        store = MessageStore(StoreConfig(storePathRootDir=str(root),
                                         mappedFileSizeCommitLog=64 * 1024,
                                         maxMessageSize=16 * 1024))
        await store.start()
        results = [await store.put_message(r) for r in records]
        if confirm_after is not None:
            last = results[confirm_after - 1]
            store.set_confirm_offset(last.commitlog_offset + last.store_size)
        for (group, topic, qid), off in (offsets or {}).items():
            store.offsets.commit(group, topic, qid, off)
        await store.shutdown()
        return results

    results = asyncio.run(run())
    cache = EpochFileCache(str(root / "epochFileCheckpoint"))
    for epoch, start in epochs or [(1, 0)]:
        cache.append(epoch, start)
    return results


def messages(n: int, topic: str = "AuditTopic", queues: int = 1,
             size: int = 200) -> list[MessageRecord]:
    return [MessageRecord(topic, i % queues, bytes([65 + i % 26]) * size, keys=[f"k{i}"])
            for i in range(n)]
