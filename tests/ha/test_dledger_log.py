"""The DLedger Raft log on disk: entries refer to their messages in the commitlog, which
holds them once; what a crash, a damaged byte or a new leader leaves is cut back to
whole entries, and a log of an older release is refused."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from mqcluster.broker.dledger_builder import EntryBuilder
from mqcluster.ha.dledger_entry import encode_region, encode_runs, region_end, region_start
from mqcluster.ha.dledger_log import DLedgerLog
from mqcluster.raft.disk_log import CorruptLogError
from mqcluster.raft.diskformat import RaftStoreError
from mqcluster.raft.types import Entry, EntryType
from mqcluster.store import MessageStore
from mqcluster.store.batch import RawBatch, check_batch
from mqcluster_testing.procs import Procs, procs  # noqa: F401  (``procs`` is a fixture)
from tests.ha.lone_member import refused_start
from tests.store.conftest import make_config

SEGMENT = 4096
HOST = "10.0.0.2:10911"


@dataclass
class Replica:
    store: MessageStore
    log: DLedgerLog


def config_for(root: Path, checked: bool = True):  # type: ignore[no-untyped-def]
    return make_config(root, mappedFileSizeCommitLog=SEGMENT, checkCRCOnRecover=checked,
                       storePathDLedgerCommitLog=str(root / "dledger"))


@asynccontextmanager
async def opened(root: Path, checked: bool = True) -> AsyncIterator[Replica]:
    store = MessageStore(config_for(root, checked))
    await store.start()
    try:
        log = DLedgerLog(root / "dledger", store)
        try:
            yield Replica(store, log)
        finally:
            log.close()
    finally:
        await store.shutdown()


class Leader:
    """Entries as a leader makes them: records placed one entry after another."""

    def __init__(self, start: int = 0) -> None:
        self.builder = EntryBuilder()
        self.builder.start_from(start)
        self.queues: dict[int, int] = {}
        self.made = 0

    def entry(self, index: int, term: int, messages: int = 3, size: int = 300) -> Entry:
        self.made += 1
        b = RawBatch("T", 0, "10.0.0.1:5000", 1_000,
                     [bytes([self.made]) * size] * messages,
                     [b"UNIQ_KEY\x01e%d-%d" % (self.made, i) for i in range(messages)],
                     [0] * messages, [0] * messages)
        enc, problem = check_batch(b, HOST, 64 * 1024, 32 * 1024, SEGMENT)
        assert enc is not None, problem
        assert self.builder.place(enc, 5, lambda _t, q: self.queues.get(q, 0), SEGMENT)
        self.queues[0] = self.queues.get(0, 0) + messages
        start, parts, runs = self.builder.take()
        return Entry(index, term, EntryType.NORMAL,
                     encode_region(start, parts, encode_runs(runs)))


def noop(index: int, term: int) -> Entry:
    return Entry(index, term, EntryType.NOOP, b"")


def index_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in (root / "dledger" / "index").glob("*.seg"))


def commitlog_file(root: Path) -> Path:
    return sorted((root / "commitlog").iterdir())[-1]


async def write(root: Path, entries: list[Entry]) -> None:
    async with opened(root) as r:
        r.log.append(entries)


async def test_each_message_is_written_once_and_entries_read_back_whole(
        tmp_path: Path) -> None:
    leader = Leader()
    entries = [noop(1, 1)] + [leader.entry(i, 1) for i in range(2, 14)]
    await write(tmp_path, entries)
    async with opened(tmp_path) as r:
        assert r.log.last_index == 13
        assert r.log.entries(1) == entries
        state = r.log.load(with_data=False)
        assert state.stored is not None
        assert list(state.stored.sizes) == [len(e.data) for e in entries]
        # the messages (crossing several commitlog segments) are in the commitlog only
        end = region_end(entries[-1].data)
        assert r.store.commitlog_max_offset == end > 2 * SEGMENT
        # a reference per entry, and 12 bytes per message for its consume-queue entry
        assert index_bytes(tmp_path) <= 42 * len(entries) + 64 * 12 + 12 * 3 * 12


@pytest.mark.parametrize("crash", [
    "commitlog tail never reached the disk",
    "index record torn",
    "index record never written",
])
async def test_a_crash_mid_write_cuts_back_to_the_last_whole_entry(
        tmp_path: Path, crash: str) -> None:
    """kill -9 (or power loss) while the last entry was written: its bytes or its
    record are missing or torn; nothing of it stays, every entry before it does."""
    leader = Leader()
    entries = [leader.entry(i, 1) for i in range(1, 6)]
    await write(tmp_path, entries)
    last_start = region_start(entries[-1].data)
    assert last_start is not None
    if crash == "commitlog tail never reached the disk":
        with open(commitlog_file(tmp_path), "r+b") as f:
            f.seek((last_start + 200) % SEGMENT)
            f.write(bytes(SEGMENT - (last_start + 200) % SEGMENT))
    else:
        seg = sorted((tmp_path / "dledger" / "index").glob("*.seg"))[-1]
        size = seg.stat().st_size
        record = seg.stat().st_size // 5  # the last of five records of one size
        os.truncate(seg, size - (5 if crash == "index record torn" else record))
    async with opened(tmp_path) as r:
        assert r.log.last_index == 4
        assert r.log.entries(1) == entries[:4]
        assert r.store.commitlog_max_offset == last_start
    async with opened(tmp_path) as r:  # and it stays so
        assert r.log.last_index == 4 and r.store.commitlog_max_offset == last_start
        again = Leader(last_start)  # the next entry goes where the cut one was
        again.queues[0] = 12
        r.log.append([again.entry(5, 2)])
        assert r.log.last_index == 5


async def test_damaged_bytes_in_the_last_entry_fail_its_crc_and_cut_it(
        tmp_path: Path) -> None:
    leader = Leader()
    entries = [leader.entry(i, 1) for i in range(1, 4)]
    await write(tmp_path, entries)
    last_start = region_start(entries[-1].data)
    assert last_start is not None
    with open(commitlog_file(tmp_path), "r+b") as f:  # a body byte: records stay parseable
        f.seek(last_start % SEGMENT + 150)
        f.write(b"\xff")
    # (with the store's own CRC check off, only the entry's CRC sees it)
    async with opened(tmp_path, checked=False) as r:
        assert r.log.last_index == 2
        assert r.store.commitlog_max_offset == last_start


async def test_damaged_bytes_of_an_older_entry_are_never_read_as_it(tmp_path: Path) -> None:
    leader = Leader()
    entries = [leader.entry(i, 1) for i in range(1, 4)]
    await write(tmp_path, entries)
    second = region_start(entries[1].data)
    assert second is not None
    with open(commitlog_file(tmp_path), "r+b") as f:
        f.seek(second % SEGMENT + 150)
        f.write(b"\xff")
    async with opened(tmp_path, checked=False) as r:
        assert r.log.last_index == 3
        assert r.log.entries(3) == entries[2:]
        with pytest.raises(CorruptLogError, match="entry 2: its commitlog bytes"):
            r.log.entries(2, 3)


async def test_a_damaged_index_record_before_the_last_refuses_the_log(tmp_path: Path) -> None:
    leader = Leader()
    await write(tmp_path, [leader.entry(i, 1) for i in range(1, 4)])
    seg = sorted((tmp_path / "dledger" / "index").glob("*.seg"))[-1]
    with open(seg, "r+b") as f:
        f.seek(30)
        f.write(b"\xff")
    with pytest.raises(CorruptLogError, match="CRC mismatch"):
        async with opened(tmp_path):
            pass


async def test_a_new_leaders_entries_replace_an_uncommitted_suffix_and_its_bytes(
        tmp_path: Path) -> None:
    """A follower held entries 3-4 of an old leader that were never committed; the new
    leader's entries 3-5 replace them, in the log and in the commitlog."""
    old = Leader()
    kept = [old.entry(1, 1), old.entry(2, 1)]
    lost = [old.entry(3, 1), old.entry(4, 1, messages=5)]
    new = Leader(region_end(kept[-1].data))
    new.queues[0] = 6
    replacing = [noop(3, 2), new.entry(4, 2), new.entry(5, 2, messages=1)]
    async with opened(tmp_path) as r:
        r.log.append(kept + lost)
        r.store.confirm_to(region_end(kept[-1].data), True)  # entries 1-2 committed
        r.log.append(replacing)
        assert r.log.entries(1) == kept + replacing
        r.store.confirm_to(region_end(replacing[-1].data), True)
        await r.store.wait_dispatched()
        got = r.store.get_messages("T", 0, 0, 100).messages
        assert [m.properties["UNIQ_KEY"] for m in got] == \
            ["e1-0", "e1-1", "e1-2", "e2-0", "e2-1", "e2-2", "e1-0", "e1-1", "e1-2", "e2-0"]
        assert [m.queue_offset for m in got] == list(range(10))
    async with opened(tmp_path) as r:
        assert r.log.entries(1) == kept + replacing
        assert r.store.commitlog_max_offset == region_end(replacing[-1].data)


async def test_a_restarted_store_shows_consumers_committed_messages_only(
        tmp_path: Path) -> None:
    leader = Leader()
    entries = [leader.entry(i, 1) for i in range(1, 4)]
    async with opened(tmp_path) as r:
        r.log.append(entries)
        r.store.confirm_to(region_end(entries[0].data), True)  # only entry 1 committed
    async with opened(tmp_path) as r:
        assert r.store.commitlog_max_offset == region_end(entries[-1].data)
        assert r.store.max_offset("T", 0) == 3
        r.store.confirm_to(region_end(entries[-1].data), True)
        await r.store.wait_dispatched()
        assert r.store.max_offset("T", 0) == 9


async def test_a_log_of_an_older_release_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    old = tmp_path / "dledger" / "log"
    old.mkdir(parents=True)
    seg = old / ("1".zfill(20) + ".seg")
    seg.write_bytes(b"an older release's entries")
    with pytest.raises(RaftStoreError, match="older release") as refused:
        async with opened(tmp_path):
            pass
    assert "\n" not in str(refused.value)
    assert seg.read_bytes() == b"an older release's entries"


async def test_a_commitlog_no_index_accounts_for_is_refused(tmp_path: Path) -> None:
    store = MessageStore(config_for(tmp_path))
    await store.start()
    try:
        store.append_raw_batch(RawBatch("T", 0, "h:1", 1, [b"x"], [b""], [0], [0]), 1, HOST)
        with pytest.raises(RaftStoreError, match="not a DLedger store of this release"):
            DLedgerLog(tmp_path / "dledger", store)
        assert store.commitlog_max_offset > 0
    finally:
        await store.shutdown()


def test_mqbroker_on_an_older_releases_log_stops_with_one_line(
    tmp_path: Path, procs: Procs  # noqa: F811
) -> None:
    old = tmp_path / "store" / "dledger" / "log"
    old.mkdir(parents=True)
    (old / ("1".zfill(20) + ".seg")).write_bytes(b"entries of an older release")
    out = refused_start(tmp_path, procs)
    assert f"{old} is the DLedger log of an older release" in out, out
    assert (old / ("1".zfill(20) + ".seg")).read_bytes() == b"entries of an older release"


async def test_entries_whose_segment_retention_deleted_come_back_as_where_they_end(
        tmp_path: Path) -> None:
    """A restarted replica applies its log again from the start: an entry whose bytes
    retention deleted (dispatched long ago) comes back without them, enough to apply
    (the consume queues' limit never moves back), never mistaken for its messages."""
    leader = Leader()
    entries = [leader.entry(i, 1) for i in range(1, 13)]
    end = region_end(entries[-1].data)
    async with opened(tmp_path) as r:
        r.log.append(entries)
        r.store.confirm_to(end, True)
        await r.store.wait_dispatched()
        files = r.store._commitlog.files
        assert files.delete_head(lambda seg: seg.limit <= SEGMENT, 1) == 1
    async with opened(tmp_path) as r:
        assert r.store.commitlog_min_offset == SEGMENT
        back = r.log.entries(1)
        gone = [e for e in back if region_start(e.data) < SEGMENT]  # (a blank there too)
        assert gone and all(region_end(e.data) == region_start(e.data) for e in gone)
        assert back[len(gone):] == entries[len(gone):]
        assert r.store.confirm_offset == end
