from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from mqcluster.store import MessageRecord, MessageStore, StoreConfig

SEGMENT = 4096
CQ_FILE = 20 * 10


class FakeClock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FsyncCounter:
    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, fd: int) -> None:
        with self._lock:
            self.calls += 1
        os.fsync(fd)


def make_config(root: Path, **overrides: Any) -> StoreConfig:
    values: dict[str, Any] = {
        "storePathRootDir": str(root),
        "mappedFileSizeCommitLog": SEGMENT,
        "mappedFileSizeConsumeQueue": CQ_FILE,
        "flushDiskType": "SYNC_FLUSH",
        "deleteWhen": "04",
    }
    values.update(overrides)
    return StoreConfig(**values)


def rec(i: int, topic: str = "T", queue_id: int = 0, size: int = 100,
        tags: str | None = None) -> MessageRecord:
    return MessageRecord(topic=topic, queue_id=queue_id, body=bytes([i % 251]) * size,
                         tags=tags, keys=[f"k{i}"], properties={"UNIQ_KEY": f"id-{i}"},
                         born_timestamp=1_000 + i, born_host="10.0.0.1:5000")


StoreFactory = Callable[..., MessageStore]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def store_factory(tmp_path: Path, clock: FakeClock) -> AsyncIterator[StoreFactory]:
    opened: list[MessageStore] = []

    def factory(root: Path | None = None, **kw: Any) -> MessageStore:
        hooks = {k: kw.pop(k) for k in ("fsync", "disk_usage") if k in kw}
        s = MessageStore(make_config(root or tmp_path / "store", **kw), clock=clock, **hooks)
        opened.append(s)
        return s

    yield factory
    for s in opened:
        if s._opened:
            await s.shutdown()


def commitlog_bytes(store: MessageStore) -> bytes:
    """The whole commitlog, read segment by segment."""
    out = b""
    while len(out) < store.commitlog_max_offset:
        out += store.read_commitlog(len(out), store.commitlog_max_offset - len(out))
    return out


def count_writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many buffers each ``Segment.append_parts`` call writes, from now on."""
    from mqcluster.store.segment import Segment

    calls: list[int] = []
    real = Segment.append_parts

    def counted(self: Segment, parts):  # type: ignore[no-untyped-def]
        calls.append(len(parts))
        return real(self, parts)

    monkeypatch.setattr(Segment, "append_parts", counted)
    return calls
