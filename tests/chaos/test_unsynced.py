"""The power-loss filesystem's model: a file's bytes since its last fsync are seen by
reads, reach the disk at a fsync, and are gone after a drop; namespace changes are
undone unless their directory was fsynced."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from chaos.unsynced import PAGE, Journal, Overlay, SyncPlan


class Disk:
    """A backing file in memory."""

    def __init__(self, data: bytes = b"") -> None:
        self.data = bytearray(data)

    def read(self, offset: int, size: int) -> bytes:
        return bytes(self.data[offset:offset + size])

    def apply(self, plan: SyncPlan) -> None:
        if plan.cut_to is not None:
            del self.data[plan.cut_to:]
        del self.data[plan.size:]
        self.data += bytes(plan.size - len(self.data))
        for offset, chunk in plan.writes:
            self.data[offset:offset + len(chunk)] = chunk


offsets = st.integers(0, 3 * PAGE + 50)
ops = st.lists(st.one_of(
    st.tuples(st.just("write"), offsets, st.binary(min_size=1, max_size=PAGE + 100)),
    st.tuples(st.just("truncate"), offsets),
    st.tuples(st.just("fsync")),
    st.tuples(st.just("drop")),
), max_size=30)


@settings(max_examples=300, deadline=None)
@given(initial=st.binary(max_size=2 * PAGE + 7), steps=ops)
def test_reads_see_every_write_and_a_drop_goes_back_to_the_last_fsync(
        initial: bytes, steps: list[tuple]) -> None:
    disk = Disk(initial)
    overlay = Overlay(len(initial))
    now = bytearray(initial)  # what a POSIX file holds
    synced = bytes(initial)
    for step in steps:
        if step[0] == "write":
            _, offset, data = step
            overlay.write(offset, data, disk.read)
            if offset > len(now):
                now += bytes(offset - len(now))
            now[offset:offset + len(data)] = data
        elif step[0] == "truncate":
            overlay.truncate(step[1])
            del now[step[1]:]
            now += bytes(step[1] - len(now))
        elif step[0] == "fsync":
            disk.apply(overlay.plan())
            overlay.synced()
            synced = bytes(now)
            assert bytes(disk.data) == synced
        else:
            overlay.drop()
            now = bytearray(synced)
        assert disk.data == synced, "nothing reaches the disk before a fsync"
        assert overlay.size == len(now)
        assert overlay.read(0, len(now) + 10, disk.read) == bytes(now)
    if steps:
        start, size = len(now) // 3, len(now) // 2
        assert overlay.read(start, size, disk.read) == bytes(now[start:start + size])


def test_a_truncate_hides_the_durable_bytes_past_it_even_when_the_file_grows_again(
        ) -> None:
    disk = Disk(b"x" * 100)
    overlay = Overlay(100)
    overlay.truncate(10)
    overlay.truncate(50)
    assert overlay.read(0, 100, disk.read) == b"x" * 10 + bytes(40)
    plan = overlay.plan()
    assert (plan.cut_to, plan.size) == (10, 50)
    overlay.drop()
    assert overlay.read(0, 200, disk.read) == b"x" * 100


def test_unsynced_bytes_count_dirty_pages() -> None:
    overlay = Overlay(0)
    overlay.write(PAGE - 1, b"ab", Disk().read)
    assert overlay.unsynced_bytes == 2 * PAGE
    assert overlay.drop() == 2 * PAGE
    assert overlay.unsynced_bytes == 0 and not overlay.dirty


# ---------------------------------------------------------------------- namespace


def test_a_file_created_in_a_directory_never_fsynced_is_gone_after_undo(
        tmp_path: Path) -> None:
    j = Journal(str(tmp_path / "trash"))
    d = tmp_path / "d"
    d.mkdir()
    (d / "new").write_bytes(b"x")
    j.create(str(d / "new"))
    assert j.undo() == [f"create {d / 'new'}"]
    assert not (d / "new").exists()


def test_a_directory_fsync_makes_its_creates_durable(tmp_path: Path) -> None:
    j = Journal(str(tmp_path / "trash"))
    (tmp_path / "kept").write_bytes(b"x")
    j.create(str(tmp_path / "kept"))
    j.fsync_dir(str(tmp_path))
    (tmp_path / "lost").write_bytes(b"y")
    j.create(str(tmp_path / "lost"))
    j.undo()
    assert sorted(os.listdir(tmp_path)) == ["kept"]


def test_a_rename_over_a_file_is_undone_with_the_replaced_file_back(tmp_path: Path) -> None:
    j = Journal(str(tmp_path / "trash"))
    d = tmp_path / "d"
    d.mkdir()
    (d / "conf").write_bytes(b"old")
    (d / "conf.tmp").write_bytes(b"new")
    j.rename(str(d / "conf.tmp"), str(d / "conf"))
    assert (d / "conf").read_bytes() == b"new"
    j.undo()
    assert ((d / "conf").read_bytes(), (d / "conf.tmp").read_bytes()) == (b"old", b"new")


def test_a_rename_across_directories_needs_both_fsynced(tmp_path: Path) -> None:
    j = Journal(str(tmp_path / "trash"))
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "f").write_bytes(b"x")
    j.rename(str(a / "f"), str(b / "f"))
    j.fsync_dir(str(b))
    j.undo()
    assert (a / "f").exists() and not (b / "f").exists()
    j.rename(str(a / "f"), str(b / "f"))
    j.fsync_dir(str(a))
    j.fsync_dir(str(b))
    assert j.undo() == []
    assert (b / "f").exists()


def test_a_removal_is_undone_until_its_directory_is_fsynced_then_the_trash_is_emptied(
        tmp_path: Path) -> None:
    trash = tmp_path / "trash"
    j = Journal(str(trash))
    d = tmp_path / "d"
    d.mkdir()
    (d / "f").write_bytes(b"x")
    j.remove(str(d / "f"))
    assert not (d / "f").exists()
    j.undo()
    assert (d / "f").read_bytes() == b"x"
    j.remove(str(d / "f"))
    j.fsync_dir(str(d))
    assert j.undo() == [] and not (d / "f").exists() and os.listdir(trash) == []
