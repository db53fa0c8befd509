"""ASYNC_FLUSH, controller mode, power loss: a commitlog cut that the checkpoint and the
epoch file record at once but that never reaches the disk.

Power-loss model (the one ``chaos.lazyfs`` implements, ``chaos.unsynced.Overlay``): a
file's durable content is what it held at its last fsync; ``atomic_write`` files (the
checkpoint, the epoch file) are durable when written. ``DurableImage`` is the store's
fsync hook: it snapshots the file at every fsync, and ``power_loss`` copies the store as
a power loss would leave it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from chaos.unsynced import Overlay
from mqcluster.ha.slave import HASlaveClient, HASlaveOptions
from mqcluster.protocol.ha import MasterHandshake, Transfer
from mqcluster.protocol.sync_point import NoCommonEpochError, find_sync_point, with_ends
from mqcluster.store import MessageStore
from mqcluster.store.checkpoint import load_checkpoint
from mqcluster.store.epoch_file import EpochFileCache

from .conftest import FakeClock, make_config, rec

NEVER = 3_600_000  # ms: the ASYNC flusher never fires by itself; flush() is the fsync


class DurableImage:
    """The store's fsync: what each file held at its last fsync."""

    def __init__(self) -> None:
        self.synced: dict[str, bytes] = {}

    def __call__(self, fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        size = os.fstat(fd).st_size
        self.synced[path] = os.pread(fd, size, 0)
        os.fsync(fd)

    def power_loss(self, root: Path, to: Path) -> Path:
        """``root`` as a power loss leaves it, copied to ``to``."""
        shutil.copytree(root, to)
        for path, data in self.synced.items():
            rel = os.path.relpath(path, root)
            if not rel.startswith("..") and os.path.exists(to / rel):
                (to / rel).write_bytes(data)
        return to


def open_store(root: Path, fsync: DurableImage | None = None) -> MessageStore:
    cfg = make_config(root, flushDiskType="ASYNC_FLUSH", flushIntervalCommitLog=NEVER)
    return MessageStore(cfg, clock=FakeClock(), fsync=fsync or os.fsync)


async def put(store: MessageStore, i: int, size: int) -> tuple[int, int]:
    r = await store.put_message(rec(i, size=size))
    assert r.ok
    return r.commitlog_offset, r.commitlog_offset + r.store_size


def test_the_cut_zero_from_makes_is_undone_by_a_power_loss() -> None:
    """``Segment.zero_from`` is ftruncate(pos) + ftruncate(size), with no fsync after it:
    on the lazyfs model the old tail is back after the power loss."""
    old = b"R" * 8192
    ov = Overlay(len(old))
    durable = lambda off, n: old[off:off + n]  # noqa: E731
    ov.truncate(19681 % 8192)
    ov.truncate(8192)
    assert ov.read(0, 8192, durable)[19681 % 8192:] == bytes(8192 - 19681 % 8192)
    ov.drop()  # power loss
    assert ov.read(0, 8192, durable) == old


async def test_a_cut_the_checkpoint_records_is_on_disk_after_a_power_loss(
        tmp_path: Path) -> None:
    image = DurableImage()
    store = open_store(tmp_path / "b1", image)
    await store.start()
    try:
        ends = [(await put(store, i, 100))[1] for i in range(5)]
        await store.flush()  # every record fsynced: acknowledged and on disk
        cut = ends[2]
        await store.truncate_commitlog(cut)  # a slave matching its master
        after = image.power_loss(tmp_path / "b1", tmp_path / "b1-after")
    finally:
        await store.shutdown()
    cp = load_checkpoint(str(after / "checkpoint"))
    assert cp is not None and cp.physic_offset == cp.logics_offset == cut
    again = open_store(after)
    again.open()
    try:
        # Fails today: the checkpoint says the log ends at `cut`, the disk holds ends[-1].
        assert again.commitlog_max_offset == cut
    finally:
        again.close()


async def test_a_new_master_does_not_cut_whole_records_back_to_a_stale_checkpoint(
        tmp_path: Path) -> None:
    """b1, chaos seed 38: cut to 19681 "to match the master" inside its record
    [19621, 19820); power loss; recovered max 19820; becoming master of epoch 71:
    "truncating commitlog from 19820 to 19681", again after every later power loss."""
    image = DurableImage()
    root = tmp_path / "b1"
    store = open_store(root, image)
    await store.start()
    try:
        spans = [await put(store, i, 100) for i in range(5)]
        await store.flush()
        start, end = spans[-1]
        await store.truncate_commitlog(start + 60)  # the sync point, inside the last record
        after = image.power_loss(root, tmp_path / "b1-loss1")
    finally:
        await store.shutdown()
    for n in (2, 3):  # successive power losses: the same cut each time
        image = DurableImage()
        s = open_store(after, image)
        await s.start()
        try:
            # Today: max == end (the cut came undone: whole, CRC-valid, fsynced records).
            assert s.commitlog_max_offset in (start, end)
            complete = s.complete_offset  # where _change_to_master cuts
            # Fails today: complete == start + 60, the checkpoint's logics offset.
            assert complete == s.commitlog_max_offset, (
                f"a new master would cut {s.commitlog_max_offset} -> {complete}")
            await s.truncate_commitlog(complete)
            after = image.power_loss(after, tmp_path / f"b1-loss{n}")
        finally:
            await s.shutdown()


async def test_the_sync_point_is_a_record_boundary_both_replicas_hold_alike(
        tmp_path: Path) -> None:
    """b2/b0: after an undone cut a replica's epoch file labels bytes of another term
    with the master's term; the sync point min(ends) then lies inside a record."""
    image = DurableImage()
    s_root, m_root = tmp_path / "S", tmp_path / "M"
    slave_store, master = open_store(s_root, image), open_store(m_root)
    await slave_store.start()
    await master.start()
    s_epochs = EpochFileCache.load(slave_store.config.epoch_file_path)
    m_epochs = EpochFileCache.load(master.config.epoch_file_path)
    try:
        # Epoch 1: the same three records on both.
        for i in range(3):
            await put(master, i, 100)
        b0 = master.commitlog_max_offset
        assert slave_store.append_replicated(0, master.read_commitlog(0, b0))
        await slave_store.wait_dispatched(b0)
        s_epochs.append(1, 0)
        m_epochs.append(1, 0)
        # Epoch 2: S is master at b0 and writes A (fsynced: acknowledged).
        s_epochs.append(2, b0)
        _, a_end = await put(slave_store, 10, 100)
        await slave_store.flush()
        # Epoch 3: M is master at b0 and writes C (longer than A) and D, fsynced.
        m_epochs.append(3, b0)
        _, c_end = await put(master, 20, 130)
        _, d_end = await put(master, 21, 100)
        await master.flush()
        assert b0 < a_end < c_end
        # S becomes M's slave: common epoch 1 ends at b0, S cuts A off (not fsynced)...
        slave = HASlaveClient(slave_store, s_epochs, "127.0.0.1:1", HASlaveOptions(2))
        hs = MasterHandshake(master.commitlog_max_offset, 3,
                             tuple((e.epoch, e.start_offset) for e in m_epochs.entries))
        await slave.truncate_to_master(hs)
        assert slave_store.commitlog_max_offset == b0
        # ...and takes C's frame: the epoch file records (3, b0), fsynced; C is not.
        slave.append(Transfer(b0, 3, b0, 0, master.read_commitlog(b0, c_end - b0)))
        assert [(e.epoch, e.start_offset) for e in s_epochs.entries] == [(1, 0), (3, b0)]
        after = image.power_loss(s_root, tmp_path / "S-after")
        m_entries = m_epochs.entries
        m_max = master.commitlog_max_offset
        m_bytes = master.read_commitlog(0, m_max)
    finally:
        await slave_store.shutdown()
        await master.shutdown()
    s2 = open_store(after)
    s2.open()
    try:
        epochs = EpochFileCache.load(s2.config.epoch_file_path)
        epochs.truncate_suffix_by_offset(s2.commitlog_max_offset + 1)  # ReplicasManager
        s_max = s2.commitlog_max_offset
        s_bytes = s2.read_commitlog(0, s_max)
    finally:
        s2.close()
    mine = with_ends([(e.epoch, e.start_offset) for e in epochs.entries], s_max)
    theirs = with_ends([(e.epoch, e.start_offset) for e in m_entries], m_max)
    point = find_sync_point(mine, 0, s_max, theirs).truncate_to
    # Fails today: S's log holds A again (s_max == a_end) under epoch 3, point == a_end,
    # inside M's record C: S keeps A (not C) and M streams from the middle of C.
    assert s_bytes[:point] == m_bytes[:point], (
        f"sync point {point}: the replicas differ below it (S max {s_max}, "
        f"S epochs {[(e.epoch, e.start_offset) for e in epochs.entries]})")
    assert point in (b0, c_end, d_end)


async def test_a_slave_never_cuts_inside_one_of_its_records(tmp_path: Path) -> None:
    """Stores already left like b2 (an epoch file labelling another term's bytes): the
    slave stops for an operator instead of cutting at 19681 inside [19621, 19820)."""
    store = open_store(tmp_path / "b2")
    await store.start()
    try:
        spans = [await put(store, i, 100) for i in range(3)]
        start, end = spans[-1]
        epochs = EpochFileCache.load(store.config.epoch_file_path)
        epochs.append(1, 0)
        epochs.append(9, spans[1][0])  # hand-made: [spans[1][0], end) labelled epoch 9
        slave = HASlaveClient(store, epochs, "127.0.0.1:1", HASlaveOptions(1))
        # The master's epoch 9 ends 60 bytes into this replica's last record.
        hs = MasterHandshake(start + 60, 9, ((1, 0), (9, spans[1][0])))
        with pytest.raises(NoCommonEpochError, match="inside a record"):
            await slave.truncate_to_master(hs)
        assert store.commitlog_max_offset == end  # nothing cut
        # A point on a record boundary is cut as before.
        await slave.truncate_to_master(MasterHandshake(start, 9, ((1, 0), (9, spans[1][0]))))
        assert store.commitlog_max_offset == start
    finally:
        await store.shutdown()
