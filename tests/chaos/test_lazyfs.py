"""``python -m chaos.lazyfs`` as a process: writes through the mount, a fsync of part of
them, a drop, and the mount (and the backing directory) hold exactly the synced part."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.lazymount import LazyMount, fuse_unavailable
from mqcluster.common.files import fsync_dir


@pytest.fixture
def mount(lazy_mount: LazyMount) -> LazyMount:
    return lazy_mount


def test_a_drop_keeps_exactly_what_was_fsynced(mount: LazyMount) -> None:
    m = mount.mountpoint
    (m / "log").mkdir()
    fsync_dir(m)
    fd = os.open(m / "log" / "seg", os.O_CREAT | os.O_RDWR, 0o644)
    os.ftruncate(fd, 10_000)
    os.pwrite(fd, b"A" * 5000, 0)
    os.fsync(fd)
    os.pwrite(fd, b"B" * 3000, 5000)  # never synced
    os.fdatasync(fd)
    os.pwrite(fd, b"C" * 100, 8000)  # after the last sync
    os.close(fd)
    fsync_dir(m / "log")
    (m / "log" / "tmp").write_bytes(b"never synced, nor its directory entry")
    with (m / "log" / "seg").open("rb") as f:
        assert f.read(8100)[-100:] == b"C" * 100

    dropped = mount.drop_sync()

    data = (m / "log" / "seg").read_bytes()
    assert data == b"A" * 5000 + b"B" * 3000 + bytes(2000)
    assert sorted(os.listdir(m / "log")) == ["seg"]
    assert (mount.backing / "log" / "seg").read_bytes() == data
    assert dropped["undone"] == [f"create {mount.backing.resolve() / 'log' / 'tmp'}"]
    assert dropped["unsynced_bytes"] >= 100


def test_a_new_file_without_a_directory_fsync_is_gone_after_a_drop(mount: LazyMount) -> None:
    m = mount.mountpoint
    fd = os.open(m / "epoch", os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b"1")
    os.fsync(fd)
    os.close(fd)
    mount.drop_sync()
    assert not (m / "epoch").exists()


def test_an_atomic_replace_with_a_directory_fsync_survives_a_remount(
        mount: LazyMount) -> None:
    m = mount.mountpoint
    (m / "conf").write_bytes(b"old")
    fd = os.open(m / "conf", os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    fsync_dir(m)
    (m / "conf.tmp").write_bytes(b"new")
    fd = os.open(m / "conf.tmp", os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    os.replace(m / "conf.tmp", m / "conf")
    (m / "conf").write_bytes(b"newer, unsynced")
    mount.drop_sync()
    assert (m / "conf").read_bytes() == b"old", "the rename was not durable"
    os.replace(m / "conf", m / "conf2")
    fsync_dir(m)
    mount.unmount_sync()  # an unmount loses what a drop would
    mount.mount_sync()
    assert sorted(os.listdir(m)) == ["conf2"]
    assert (m / "conf2").read_bytes() == b"old"


@pytest.mark.skipif(fuse_unavailable() is not None, reason="needs the FUSE binding")
def test_bad_arguments_are_refused_with_what_is_wrong(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "chaos.lazyfs", str(tmp_path / "nope"),
                           str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "mount point" in done.stderr and "nope" in done.stderr


def test_an_unknown_control_command_is_refused(mount: LazyMount) -> None:
    with pytest.raises(OSError) as err, (mount.mountpoint / ".lazyfs").open("w") as f:
        f.write("format\n")
        f.flush()
    assert err.value.errno == errno.EINVAL
