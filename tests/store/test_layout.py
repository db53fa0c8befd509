"""A store whose files do not match its settings is refused before anything is written."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import pytest

from mqcluster.store import SegmentSizeChangedError, StoreLayoutError

from .conftest import CQ_FILE, SEGMENT, StoreFactory, rec


def snapshot(root: Path) -> dict[str, tuple[int, str]]:
    """Size and digest of every file under ``root`` (but the lock files' contents)."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            data = b"" if name in ("lock", "epochFileCheckpoint.lock") else path.read_bytes()
            out[str(path.relative_to(root))] = (path.stat().st_size,
                                                hashlib.sha256(data).hexdigest())
    return out


async def filled(store_factory: StoreFactory, root: Path, n: int = 60) -> None:
    """A closed store of ``n`` 100-byte messages: two commitlog segments, several CQ files."""
    store = store_factory(root=root)
    await store.start()
    await store.put_messages([rec(i) for i in range(n)])
    await store.shutdown()


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "inferred"])
@pytest.mark.parametrize("new_size", [2 * SEGMENT, SEGMENT // 2])
async def test_a_changed_commitlog_segment_size_is_refused_and_nothing_written(
        store_factory: StoreFactory, tmp_path: Path, recorded: bool, new_size: int) -> None:
    root = tmp_path / "store"
    await filled(store_factory, root)
    if not recorded:  # a store made before the sizes were recorded
        (root / "storeLayout.json").unlink()
    before = snapshot(root)
    with pytest.raises(SegmentSizeChangedError) as err:
        store_factory(root=root, mappedFileSizeCommitLog=new_size).open()
    message = str(err.value)
    assert f"mappedFileSizeCommitLog={new_size}" in message
    assert f"mappedFileSizeCommitLog={SEGMENT}" in message
    assert "\n" not in message
    assert snapshot(root) == before
    # Set back, the store opens with every message.
    again = store_factory(root=root)
    await again.start()
    assert again.max_offset("T", 0) == 60
    assert len(again.get_messages("T", 0, 55, 10).messages) == 5


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "inferred"])
async def test_a_changed_consume_queue_file_size_is_refused(
        store_factory: StoreFactory, tmp_path: Path, recorded: bool) -> None:
    root = tmp_path / "store"
    await filled(store_factory, root)
    if not recorded:
        (root / "storeLayout.json").unlink()
    before = snapshot(root)
    with pytest.raises(SegmentSizeChangedError) as err:
        store_factory(root=root, mappedFileSizeConsumeQueue=2 * CQ_FILE).open()
    assert f"mappedFileSizeConsumeQueue={2 * CQ_FILE}" in str(err.value)
    assert f"mappedFileSizeConsumeQueue={CQ_FILE}" in str(err.value)
    assert snapshot(root) == before


async def test_a_store_without_segments_takes_a_new_size(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    root = tmp_path / "store"
    first = store_factory(root=root)
    first.open()
    first.close()
    again = store_factory(root=root, mappedFileSizeCommitLog=2 * SEGMENT)
    await again.start()
    await again.put_message(rec(1))
    assert os.path.getsize(root / "commitlog" / f"{0:020d}") == 2 * SEGMENT


def segment(root: Path, n: int) -> Path:
    return root / "commitlog" / f"{n * SEGMENT:020d}"


async def test_a_segment_larger_than_configured_is_named(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    root = tmp_path / "store"
    await filled(store_factory, root)
    with open(segment(root, 0), "ab") as f:
        f.write(b"\0" * 10)
    before = snapshot(root)
    with pytest.raises(StoreLayoutError, match=re.escape(
            f"{segment(root, 0)}: {SEGMENT + 10} bytes, larger than "
            f"mappedFileSizeCommitLog={SEGMENT}")):
        store_factory(root=root).open()
    assert snapshot(root) == before


async def test_a_missing_middle_segment_is_named(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    root = tmp_path / "store"
    await filled(store_factory, root, n=100)
    assert segment(root, 2).exists()
    segment(root, 1).unlink()
    with pytest.raises(StoreLayoutError,
                       match=f"segment {SEGMENT:020d} is missing between {0:020d} and "
                             f"{2 * SEGMENT:020d}"):
        store_factory(root=root).open()
    assert segment(root, 2).exists() and segment(root, 0).exists()


@pytest.mark.parametrize("name", ["4096", "00000000000000004096.bak", "notes.txt"])
async def test_an_unparseable_file_name_is_named(
        store_factory: StoreFactory, tmp_path: Path, name: str) -> None:
    root = tmp_path / "store"
    await filled(store_factory, root)
    (root / "commitlog" / name).write_bytes(b"x")
    stray = root / "commitlog" / name
    with pytest.raises(StoreLayoutError, match=re.escape(f"{stray}: not a segment")):
        store_factory(root=root).open()


async def test_an_unparseable_consume_queue_file_name_is_named(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    root = tmp_path / "store"
    await filled(store_factory, root)
    stray = root / "consumequeue" / "T" / "0" / "0"
    stray.write_bytes(b"")
    with pytest.raises(StoreLayoutError, match=re.escape(f"{stray}: not a segment")):
        store_factory(root=root).open()


async def test_a_truncated_checkpoint_is_named(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    root = tmp_path / "store"
    await filled(store_factory, root)
    cp = root / "checkpoint"
    cp.write_bytes(cp.read_bytes()[:30])
    before = snapshot(root)
    with pytest.raises(StoreLayoutError, match=re.escape(f"{cp}: 30 bytes, a checkpoint is 60")):
        store_factory(root=root).open()
    assert snapshot(root) == before


async def test_an_unreadable_layout_record_is_named(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    root = tmp_path / "store"
    await filled(store_factory, root)
    (root / "storeLayout.json").write_text("{not json")
    with pytest.raises(StoreLayoutError, match=r"storeLayout\.json: unreadable"):
        store_factory(root=root).open()


async def test_directories_and_hidden_files_beside_the_segments_are_left_alone(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    root = tmp_path / "store"
    await filled(store_factory, root)
    (root / "commitlog" / "lost+found").mkdir()  # the commitlog on a file system of its own
    (root / "commitlog" / ".nfs000123").write_bytes(b"x")
    again = store_factory(root=root)
    await again.start()
    assert again.max_offset("T", 0) == 60
    assert (root / "commitlog" / "lost+found").is_dir()
