"""The store's files on a ``chaos.lazyfs`` mount: what it fsynced, directory entries
included, is there after a power loss."""

from __future__ import annotations

import os

from chaos.lazymount import LazyMount
from mqcluster.raft.disk_log import DiskLog
from mqcluster.raft.types import Entry, EntryType
from mqcluster.store.segment import SegmentedFile


def test_a_segment_in_new_directories_survives_a_power_loss(lazy_mount: LazyMount) -> None:
    # A consume queue's first segment: consumequeue/<topic>/<queue id>/ are new.
    directory = lazy_mount.mountpoint / "consumequeue" / "Topic" / "0"
    files = SegmentedFile(str(directory), 4096)
    seg = files.create(0)
    seg.append(b"x" * 100)
    os.fsync(seg.fd)
    seg.close()

    lazy_mount.power_off_sync()
    lazy_mount.mount_sync()

    assert (directory / os.path.basename(seg.path)).read_bytes()[:101] == b"x" * 100 + b"\0"


def test_raft_entries_appended_in_a_new_log_directory_survive_a_power_loss(
        lazy_mount: LazyMount) -> None:
    # A DLedger group's log under a store root the broker has just made.
    root = lazy_mount.mountpoint / "store" / "dledger"
    with DiskLog(root) as log:
        log.append([Entry(1, 1, EntryType.NORMAL, b"acknowledged")])

    lazy_mount.power_off_sync()
    lazy_mount.mount_sync()

    with DiskLog(root) as log:
        assert [(e.index, e.data) for e in log.entries(1)] == [(1, b"acknowledged")]
