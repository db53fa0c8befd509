"""The slow-disk seam: every store fsync waits for the delay a file holds."""

from __future__ import annotations

import os
import time
from pathlib import Path

from mqcluster.common.knob import FileKnob
from mqcluster.store import MessageStore
from mqcluster.store.fsync_seam import ENV, delayed_fsync, fsync_from_env

from .conftest import make_config, rec


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_delay_follows_the_file_at_most_every_refresh(tmp_path: Path) -> None:
    knob_file = tmp_path / "delay"
    knob_file.write_text("250")
    mono = FakeMonotonic()
    slept: list[float] = []
    synced: list[int] = []
    fsync = delayed_fsync(FileKnob(knob_file, monotonic=mono), synced.append, slept.append)
    fsync(7)
    knob_file.write_text("0")
    mono.now = 0.05
    fsync(7)  # read 50 ms ago: still 250
    mono.now = 0.2
    fsync(7)
    assert slept == [0.25, 0.25]
    assert synced == [7, 7, 7]


def test_unset_or_missing_file_is_plain_fsync(tmp_path: Path) -> None:
    assert fsync_from_env({}) is os.fsync
    slept: list[float] = []
    fsync = delayed_fsync(FileKnob(tmp_path / "absent"), lambda fd: None, slept.append)
    fsync(3)
    assert slept == []


async def test_sync_flush_put_waits_for_the_slow_disk(tmp_path: Path) -> None:
    knob_file = tmp_path / "delay"
    knob_file.write_text("400")
    store = MessageStore(make_config(tmp_path / "store", mappedFileSizeCommitLog=1 << 20),
                         fsync=fsync_from_env({ENV: str(knob_file)}))
    await store.start()
    try:
        started = time.monotonic()
        result = await store.put_message(rec(1))
        assert result.ok
        assert time.monotonic() - started >= 0.4
    finally:
        await store.shutdown()
