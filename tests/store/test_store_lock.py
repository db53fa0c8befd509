"""Every path a store writes is locked: a second store sharing any of them is refused."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from mqcluster.store import StoreLockedError

from .conftest import StoreFactory, rec


async def test_two_roots_sharing_one_commitlog_dir_are_refused(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    shared = tmp_path / "shared-commitlog"
    first = store_factory(root=tmp_path / "a", storePathCommitLog=str(shared))
    await first.start()
    await first.put_messages([rec(i) for i in range(3)])
    second = store_factory(root=tmp_path / "b", storePathCommitLog=str(shared))
    with pytest.raises(StoreLockedError) as err:
        second.open()
    message = str(err.value)
    assert str(shared) in message and f"pid {os.getpid()}" in message
    assert "\n" not in message
    # The refused store wrote nothing: the first one's messages are all there.
    assert first.commitlog_max_offset > 0
    assert len(first.get_messages("T", 0, 0, 10).messages) == 3
    assert not (tmp_path / "b" / "consumequeue" / "T").exists()


async def test_a_commitlog_dir_naming_another_stores_root_is_refused(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    await store_factory(root=tmp_path / "a").start()
    with pytest.raises(StoreLockedError, match="in use by another store"):
        store_factory(root=tmp_path / "b", storePathCommitLog=str(tmp_path / "a")).open()
    with pytest.raises(StoreLockedError):
        store_factory(root=tmp_path / "c",
                      storePathCommitLog=str(tmp_path / "a" / "consumequeue")).open()


@pytest.mark.parametrize("key", ["storePathEpochFile", "storePathDLedgerCommitLog"])
async def test_a_shared_epoch_file_or_dledger_dir_is_refused(
        store_factory: StoreFactory, tmp_path: Path, key: str) -> None:
    path = str(tmp_path / "shared")
    await store_factory(root=tmp_path / "a", **{key: path}).start()
    with pytest.raises(StoreLockedError, match="shared"):
        store_factory(root=tmp_path / "b", **{key: path}).open()


async def test_a_refused_store_holds_nothing(store_factory: StoreFactory,
                                             tmp_path: Path) -> None:
    shared = str(tmp_path / "cl")
    first = store_factory(root=tmp_path / "a", storePathCommitLog=shared)
    first.open()
    with pytest.raises(StoreLockedError):
        store_factory(root=tmp_path / "b", storePathCommitLog=shared).open()
    first.close()
    # The refusal released what it had locked (its root) and the first released all.
    store_factory(root=tmp_path / "a", storePathCommitLog=shared).open()
    with pytest.raises(StoreLockedError, match=re.escape(str(tmp_path / "a"))):
        store_factory(root=tmp_path / "b", storePathCommitLog=str(tmp_path / "a")).open()


async def test_one_store_may_give_a_directory_two_roles(
        store_factory: StoreFactory, tmp_path: Path) -> None:
    root = tmp_path / "a"
    store = store_factory(root=root, storePathCommitLog=str(root / "commitlog"),
                          storePathEpochFile=str(root / "epochFileCheckpoint"))
    await store.start()
    assert (await store.put_message(rec(1))).status.name == "PUT_OK"


async def test_the_lock_file_says_who_holds_the_store(store_factory: StoreFactory,
                                                     tmp_path: Path) -> None:
    store = store_factory(root=tmp_path / "a")
    store.open()
    lock = tmp_path / "a" / "lock"
    assert lock.read_text() == f"pid {os.getpid()}\n"
    store.close()
    assert lock.read_text() == ""
