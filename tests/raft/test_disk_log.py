"""The on-disk Raft log: appends, truncation, hard state, snapshots, crash recovery."""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mqcluster.raft.disk_log import CorruptLogError, DiskLog, encode_record
from mqcluster.raft.diskformat import CorruptFileError, encode_records
from mqcluster.raft.types import Entry, EntryType, HardState, Membership, Snapshot, SnapshotMeta
from tests.raft.helpers import entries_with_terms


def entries(lo: int, hi: int, term: int = 1, size: int = 8) -> list[Entry]:
    return [
        Entry(index=i, term=term, type=EntryType.NORMAL, data=f"v{i}".encode().ljust(size, b"."))
        for i in range(lo, hi + 1)
    ]


def segment_files(root: Path) -> list[Path]:
    return sorted((root / "log").glob("*.seg"))


def reopen(log: DiskLog, **kw: Any) -> DiskLog:
    log.close()
    return DiskLog(log.root, **kw)


def snap(index: int, term: int, data: bytes = b"state") -> Snapshot:
    return Snapshot(SnapshotMeta(index, term, Membership(voters=["a", "b", "c"])), data)


# --- appends -----------------------------------------------------------------------------


def test_empty_log(tmp_path: Path) -> None:
    with DiskLog(tmp_path) as log:
        assert (log.first_index, log.last_index) == (1, 0)
        assert log.hard_state == HardState(term=0, voted_for=None)
        assert log.snapshot is None
        assert log.load().entries == []


def test_append_and_reopen(tmp_path: Path) -> None:
    log = DiskLog(tmp_path)
    log.append(entries(1, 3, term=1))
    log.append([*entries(4, 5, term=2), Entry(6, 2, EntryType.NOOP, b"")])
    log = reopen(log)
    assert log.last_index == 6
    assert [log.term_at(i) for i in range(1, 7)] == [1, 1, 1, 2, 2, 2]
    noop = Entry(6, 2, EntryType.NOOP, b"")
    assert log.entries(1) == [*entries(1, 3, 1), *entries(4, 5, 2), noop]
    assert log.entries(2, 4) == entries(2, 3, 1)
    log.close()


FsyncRecorder = Callable[[], list[int]]


@pytest.fixture
def record_fsyncs(monkeypatch: pytest.MonkeyPatch) -> FsyncRecorder:
    """Call it to record, from then on, the inode of every file ``os.fsync`` is called on."""

    def start() -> list[int]:
        calls: list[int] = []
        real = os.fsync

        def recording_fsync(fd: int) -> None:
            calls.append(os.fstat(fd).st_ino)
            real(fd)

        monkeypatch.setattr(os, "fsync", recording_fsync)
        return calls

    return start


def test_one_fsync_per_appended_batch(tmp_path: Path, record_fsyncs: FsyncRecorder) -> None:
    log = DiskLog(tmp_path)
    log.append(entries(1, 1))  # creates the segment (and fsyncs its directory)
    calls = record_fsyncs()
    log.append(entries(2, 200))
    assert len(calls) == 1
    log.close()


def test_append_without_sync_leaves_the_fsync_to_sync(
    tmp_path: Path, record_fsyncs: FsyncRecorder
) -> None:
    log = DiskLog(tmp_path)
    log.append(entries(1, 1))
    calls = record_fsyncs()
    log.append(entries(2, 50), sync=False)
    log.append(entries(51, 60), sync=False)
    assert calls == []
    log.sync()  # one fsync covers both writes
    assert len(calls) == 1
    log = reopen(log)
    assert log.last_index == 60
    log.close()


def test_a_segment_switch_fsyncs_the_old_tail_written_without_sync(
    tmp_path: Path, record_fsyncs: FsyncRecorder
) -> None:
    log = DiskLog(tmp_path, segment_bytes=200)
    log.append(entries(1, 10), sync=False)  # fills the first segment
    synced = record_fsyncs()
    first = segment_files(tmp_path)[0]
    log.append(entries(11, 12), sync=False)  # opens a second segment
    assert len(segment_files(tmp_path)) == 2
    assert first.stat().st_ino in synced  # before its descriptor was closed
    log.close()
    log.sync()  # nothing to do once closed


def test_append_of_given_records_writes_them_as_is(tmp_path: Path) -> None:
    a, b = DiskLog(tmp_path / "a"), DiskLog(tmp_path / "b")
    batches = [entries(1, 3), [*entries(4, 6, term=2), Entry(7, 2, EntryType.NOOP, b"")]]
    for batch in batches:
        a.append(batch)
        b.append(batch, encode_records(batch)[0])
    (seg_a,), (seg_b,) = segment_files(a.root), segment_files(b.root)
    assert seg_a.read_bytes() == seg_b.read_bytes()
    b.append(entries(5, 6, term=3), encode_records(entries(5, 6, term=3))[0])  # truncates first
    b = reopen(b)
    assert b.entries(1) == [*entries(1, 3), entries(4, 4, term=2)[0], *entries(5, 6, term=3)]
    with pytest.raises(ValueError, match="do not encode"):
        b.append(entries(7, 8), encode_records(entries(7, 7))[0])
    assert b.last_index == 6
    a.close()
    b.close()


def test_append_rejects_gap_and_non_contiguous(tmp_path: Path) -> None:
    with DiskLog(tmp_path) as log:
        log.append(entries(1, 2))
        with pytest.raises(ValueError, match="gap"):
            log.append(entries(4, 4))
        with pytest.raises(ValueError, match="contiguous"):
            log.append([*entries(3, 3), *entries(5, 5)])
        assert log.last_index == 2


def test_segments_roll_and_reads_span_them(tmp_path: Path) -> None:
    log = DiskLog(tmp_path, segment_bytes=200)
    for i in range(1, 41, 4):
        log.append(entries(i, i + 3))
    assert len(segment_files(tmp_path)) > 3
    log = reopen(log, segment_bytes=200)
    assert log.entries(1) == entries(1, 40)
    assert log.entries(7, 33) == entries(7, 32)
    log.close()


# --- truncation --------------------------------------------------------------------------


def test_truncate_within_segment_then_append(tmp_path: Path) -> None:
    log = DiskLog(tmp_path)
    log.append(entries(1, 10, term=1))
    log.truncate_from(6)
    assert log.last_index == 5
    log.append(entries(6, 8, term=3))
    log = reopen(log)
    assert log.entries(1) == entries(1, 5, 1) + entries(6, 8, 3)
    log.close()


def test_truncate_across_segments(tmp_path: Path) -> None:
    log = DiskLog(tmp_path, segment_bytes=150)
    for i in range(1, 31, 3):
        log.append(entries(i, i + 2))
    before = len(segment_files(tmp_path))
    log.truncate_from(8)
    assert len(segment_files(tmp_path)) < before
    assert log.last_index == 7
    log = reopen(log, segment_bytes=150)
    assert log.entries(1) == entries(1, 7)
    log.append(entries(8, 9, term=2))
    assert log.entries(8) == entries(8, 9, 2)
    log.close()


def test_append_with_conflicting_index_truncates_first(tmp_path: Path) -> None:
    log = DiskLog(tmp_path)
    log.append(entries(1, 5, term=1))
    log.append(entries(3, 4, term=2))
    log = reopen(log)
    assert log.entries(1) == entries(1, 2, 1) + entries(3, 4, 2)
    log.close()


def test_truncate_everything(tmp_path: Path) -> None:
    log = DiskLog(tmp_path, segment_bytes=100)
    log.append(entries(1, 10))
    log.truncate_from(1)
    assert log.last_index == 0
    assert segment_files(tmp_path) == []
    log.append(entries(1, 1, term=4))
    log = reopen(log)
    assert log.entries(1) == entries(1, 1, 4)
    log.close()


# --- hard state --------------------------------------------------------------------------


def test_hard_state_roundtrip(tmp_path: Path) -> None:
    log = DiskLog(tmp_path)
    log.save_hard_state(HardState(term=7, voted_for="n2"))
    log.save_hard_state(HardState(term=8, voted_for=None))
    log = reopen(log)
    assert log.hard_state == HardState(term=8, voted_for=None)
    assert list(tmp_path.glob("*.tmp")) == []
    log.close()


def test_hard_state_write_fsync_rename_fsync_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = DiskLog(tmp_path)
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync-dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "fsync-file")
        real_fsync(fd)

    def replace(a: str | Path, b: str | Path) -> None:
        events.append(f"rename {Path(a).name}->{Path(b).name}")
        real_replace(a, b)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    log.save_hard_state(HardState(term=3, voted_for="n1"))
    assert events == ["fsync-file", "rename hardstate.tmp->hardstate", "fsync-dir"]
    log.close()


def test_crash_before_rename_keeps_old_hard_state(tmp_path: Path) -> None:
    log = DiskLog(tmp_path)
    log.save_hard_state(HardState(term=2, voted_for="n0"))
    log.close()
    (tmp_path / "hardstate.tmp").write_bytes(b"half-written garbage")
    log = DiskLog(tmp_path)
    assert log.hard_state == HardState(term=2, voted_for="n0")
    assert not (tmp_path / "hardstate.tmp").exists()
    log.close()


def test_damaged_hard_state_is_reported(tmp_path: Path) -> None:
    DiskLog(tmp_path).save_hard_state(HardState(term=2, voted_for="n0"))
    raw = bytearray((tmp_path / "hardstate").read_bytes())
    raw[-3] ^= 0x01
    (tmp_path / "hardstate").write_bytes(bytes(raw))
    with pytest.raises(CorruptFileError, match="hardstate"):
        DiskLog(tmp_path)


# --- snapshots and compaction --------------------------------------------------------------


def test_snapshot_compacts_whole_segments_only(tmp_path: Path) -> None:
    log = DiskLog(tmp_path, segment_bytes=150)
    for i in range(1, 31, 3):
        log.append(entries(i, i + 2, term=2))
    before = segment_files(tmp_path)
    log.save_snapshot(snap(14, 2))
    after = segment_files(tmp_path)
    assert 0 < len(after) < len(before)
    first_kept = int(after[0].name.split(".")[0])
    assert first_kept <= 15  # the segment holding 15 survives, with whatever precedes it
    assert log.first_index == 15
    assert log.term_at(14) == 2
    with pytest.raises(IndexError):
        log.entries(14)
    log = reopen(log, segment_bytes=150)
    state = log.load()
    assert state.snapshot == snap(14, 2)
    assert state.entries == entries(15, 30, term=2)
    log.close()


def test_snapshot_past_log_end_discards_log(tmp_path: Path) -> None:
    log = DiskLog(tmp_path)
    log.append(entries(1, 5, term=1))
    log.save_snapshot(snap(20, 3))
    assert log.last_index == 20
    assert segment_files(tmp_path) == []
    log.append(entries(21, 22, term=3))
    log = reopen(log)
    assert log.load().entries == entries(21, 22, term=3)
    log.close()


def test_snapshot_conflicting_with_log_discards_log(tmp_path: Path) -> None:
    log = DiskLog(tmp_path)
    log.append(entries(1, 10, term=1))
    log.save_snapshot(snap(5, 2))  # our entry 5 has term 1: our suffix is stale
    assert (log.last_index, segment_files(tmp_path)) == (5, [])
    log.close()


def test_crash_between_snapshot_and_segment_removal(tmp_path: Path) -> None:
    log = DiskLog(tmp_path, segment_bytes=100)
    log.append(entries(1, 20, term=1))
    saved = {p.name: p.read_bytes() for p in segment_files(tmp_path)}
    log.save_snapshot(snap(12, 1))
    log.close()
    for name, raw in saved.items():  # as if the process died before unlinking them
        (tmp_path / "log" / name).write_bytes(raw)
    log = DiskLog(tmp_path, segment_bytes=100)
    assert log.load().entries == entries(13, 20)
    assert all(int(p.name.split(".")[0]) <= 13 for p in segment_files(tmp_path)[:1])
    log.close()


def test_truncate_below_snapshot_is_refused(tmp_path: Path) -> None:
    with DiskLog(tmp_path) as log:
        log.append(entries(1, 10))
        log.save_snapshot(snap(5, 1))
        with pytest.raises(ValueError, match="snapshot"):
            log.truncate_from(5)


# --- crash recovery --------------------------------------------------------------------------


def _write_log(root: Path, n: int) -> tuple[Path, bytes, list[int]]:
    """n entries in one segment; returns its path, its bytes and each record's end offset."""
    with DiskLog(root) as log:
        log.append(entries(1, n, size=20))
    (path,) = segment_files(root)
    raw = path.read_bytes()
    ends, pos = [], 0
    for e in entries(1, n, size=20):
        pos += len(encode_record(e))
        ends.append(pos)
    assert ends[-1] == len(raw)
    return path, raw, ends


def test_torn_tail_at_every_byte(tmp_path: Path) -> None:
    path, raw, ends = _write_log(tmp_path, 4)
    for cut in range(len(raw) + 1):
        path.write_bytes(raw[:cut])
        complete = sum(1 for end in ends if end <= cut)
        with DiskLog(tmp_path) as log:
            assert log.last_index == complete, f"cut at byte {cut}"
            size = path.stat().st_size if path.exists() else 0  # an emptied segment goes
            assert size == (ends[complete - 1] if complete else 0)
            log.append(entries(complete + 1, complete + 1, term=9))  # and the log is writable
        with DiskLog(tmp_path) as log:
            assert log.entries(1) == entries(1, complete, size=20) + entries(
                complete + 1, complete + 1, term=9
            )


def test_zero_filled_tail_is_truncated(tmp_path: Path) -> None:
    path, raw, _ends = _write_log(tmp_path, 3)
    path.write_bytes(raw + bytes(4096))
    with DiskLog(tmp_path) as log:
        assert log.last_index == 3
    assert path.stat().st_size == len(raw)


def test_bad_crc_of_the_final_record_is_a_torn_tail(tmp_path: Path) -> None:
    path, raw, _ends = _write_log(tmp_path, 3)
    damaged = bytearray(raw)
    damaged[-1] ^= 0x10
    path.write_bytes(bytes(damaged))
    with DiskLog(tmp_path) as log:
        assert log.last_index == 2


def test_flipped_bit_in_the_middle_raises(tmp_path: Path) -> None:
    path, raw, ends = _write_log(tmp_path, 5)
    for target in (1, 2, 3):  # records 2, 3, 4: each followed by more records
        start = ends[target - 1]
        for byte in (start + 3, start + 9, ends[target] - 1):  # length, index, data
            damaged = bytearray(raw)
            damaged[byte] ^= 0x04
            path.write_bytes(bytes(damaged))
            with pytest.raises(CorruptLogError) as err:
                DiskLog(tmp_path)
            assert err.value.path == path
            assert err.value.offset == start
            assert str(path) in str(err.value) and f"offset {start}" in str(err.value)
            assert path.read_bytes() == bytes(damaged)  # nothing was cut


def test_damage_in_a_sealed_segment_raises_even_at_its_end(tmp_path: Path) -> None:
    log = DiskLog(tmp_path, segment_bytes=100)
    log.append(entries(1, 10))
    log.append(entries(11, 20))
    log.close()
    first = segment_files(tmp_path)[0]
    raw = bytearray(first.read_bytes())
    raw[-1] ^= 0x01
    first.write_bytes(bytes(raw))
    with pytest.raises(CorruptLogError) as err:
        DiskLog(tmp_path, segment_bytes=100)
    assert err.value.path == first


def test_missing_segment_is_reported(tmp_path: Path) -> None:
    log = DiskLog(tmp_path, segment_bytes=60)
    for i in range(1, 13, 2):
        log.append(entries(i, i + 1))
    log.close()
    files = segment_files(tmp_path)
    assert len(files) >= 3
    files[1].unlink()
    with pytest.raises(CorruptLogError, match="expected"):
        DiskLog(tmp_path)


def test_empty_tail_segment_left_by_a_crash_is_removed(tmp_path: Path) -> None:
    log = DiskLog(tmp_path)
    log.append(entries(1, 3))
    log.close()
    (tmp_path / "log" / f"{4:020d}.seg").write_bytes(b"")
    with DiskLog(tmp_path) as log:
        assert log.last_index == 3
        log.append(entries(4, 5))
    with DiskLog(tmp_path) as log:
        assert log.entries(1) == entries(1, 5)


def test_begin_sync_hands_out_a_descriptor_only_for_unsynced_writes(tmp_path: Path) -> None:
    log = DiskLog(tmp_path)
    assert log.begin_sync() is None
    log.append(entries_with_terms(1, 1), sync=False)
    pending = log.begin_sync()
    assert pending is not None
    log.append(entries_with_terms(1, 1, 1)[2:], sync=False)  # after the hand-out
    log.close()  # the tail's own descriptor may go meanwhile
    log.sync_descriptor(pending)
    with pytest.raises(OSError):
        os.fstat(pending.fd)  # closed by sync_descriptor
    assert [e.index for e in DiskLog(tmp_path).load().entries] == [1, 2, 3]


# --- loading without the entries' data -----------------------------------------------


def described(es: list[Entry]) -> tuple[list[int], list[int], list[int]]:
    return [e.term for e in es], [int(e.type) for e in es], [len(e.data) for e in es]


def test_a_log_loads_as_terms_types_and_sizes_across_segments_and_truncation(
        tmp_path: Path) -> None:
    log = DiskLog(tmp_path, segment_bytes=200)
    config = Entry(index=11, term=1, type=EntryType.CONFIG, data=b"members")
    log.append(entries(1, 10, size=20))
    log.append([config])
    log.append(entries(12, 30, size=9))
    log.truncate_from(25)
    log.append(entries(25, 27, term=2, size=3))
    want = log.entries(1)
    for current in (log, reopen(log, segment_bytes=200)):
        state = current.load(with_data=False)
        assert state.entries == [] and state.stored is not None
        st = state.stored
        assert st.first_index == 1
        assert (list(st.terms), list(st.types), list(st.sizes)) == described(want)
        log = current
    log.close()


# --- page cache ---------------------------------------------------------------------------

_PAGE = mmap.PAGESIZE


def cached_pages(path: Path) -> int:
    """How many of the file's pages are in the page cache (mincore of a mapping,
    which does not read anything in)."""
    size = path.stat().st_size
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    with open(path, "rb") as f:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, f.fileno(), 0)
        assert address not in (None, ctypes.c_void_p(-1).value)
    try:
        vec = ctypes.create_string_buffer((size + _PAGE - 1) // _PAGE)
        assert libc.mincore(address, size, vec) == 0, os.strerror(ctypes.get_errno())
        return sum(b & 1 for b in vec.raw)
    finally:
        libc.munmap(address, size)


def big_entries(lo: int, hi: int) -> list[Entry]:
    return entries(lo, hi, size=8 * _PAGE)


def test_fsynced_entries_leave_the_page_cache(tmp_path: Path) -> None:
    log = DiskLog(tmp_path)
    log.append(big_entries(1, 8), sync=False)
    (path,) = segment_files(tmp_path)
    assert cached_pages(path) >= 64  # written, not yet durable: kept
    log.sync()
    assert cached_pages(path) <= 1  # the partial page at the end may stay
    log.append(big_entries(9, 16))  # sync=True
    assert cached_pages(path) <= 1
    log.append(big_entries(17, 24), sync=False)
    pending = log.begin_sync()
    assert pending is not None
    log.append(big_entries(25, 32), sync=False)  # after the hand-out: not durable yet
    log.sync_descriptor(pending)
    assert 64 <= cached_pages(path) <= 66
    log.sync()
    assert cached_pages(path) <= 1
    assert [e.index for e in reopen(log).entries(1)] == list(range(1, 33))


def test_a_log_told_to_keep_its_pages_keeps_them(tmp_path: Path) -> None:
    log = DiskLog(tmp_path, drop_synced_pages=False)
    log.append(big_entries(1, 8))
    (path,) = segment_files(tmp_path)
    assert cached_pages(path) >= 64


# --- values out of range, as older versions saved what a peer sent ------------------------------


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        ({"term": 2**64, "votedFor": None}, f"term: {2**64} is out of range"),
        ({"term": 2**63, "votedFor": "n0"}, f"term: {2**63} is out of range"),
        ({"term": -1, "votedFor": None}, "term: -1 is out of range"),
        ({"term": True, "votedFor": None}, "term: True is not an integer"),
        ({"term": 1.5, "votedFor": None}, "term: 1.5 is not an integer"),
        ({"term": "3", "votedFor": None}, "term: '3' is not an integer"),
        ({"term": 3, "votedFor": 7}, "votedFor: 7 is not a member id"),
        ({"term": 3}, "'votedFor'"),
        ([3, None], "not a JSON object"),
    ],
)
def test_hard_state_out_of_range_names_the_file(tmp_path: Path, doc: object,
                                                reason: str) -> None:
    payload = json.dumps(doc).encode()
    (tmp_path / "hardstate").write_bytes(b"MQHS" + struct.pack(">I", zlib.crc32(payload))
                                         + payload)
    with pytest.raises(CorruptFileError) as err:
        DiskLog(tmp_path)
    assert str(err.value).startswith(f"corrupt file {tmp_path / 'hardstate'}: ")
    assert reason in str(err.value)
    assert "\n" not in str(err.value)


def test_log_record_with_a_term_past_a_long_is_reported(tmp_path: Path) -> None:
    with DiskLog(tmp_path) as log:
        log.append(entries(1, 3))
        log.append([Entry(4, 2**63, EntryType.NOOP, b"")])
        log.append(entries(5, 5, term=2**63))
    with pytest.raises(CorruptLogError, match=f"record 4 has term {2**63}, past {2**63 - 1}"):
        DiskLog(tmp_path)
