from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.lazymount import LazyMount, fuse_unavailable
from chaos.netns import probe


@pytest.fixture(scope="session")
def netns() -> None:
    """Skip where network namespaces cannot be made (the suite needs root)."""
    reason = probe()
    if reason is not None:
        pytest.skip(f"chaos tests need network namespaces: {reason}")


@pytest.fixture
def lazy_mount(tmp_path: Path) -> Iterator[LazyMount]:
    """A ``chaos.lazyfs`` mount on ``tmp_path/mnt`` over ``tmp_path/disk``; skipped
    where FUSE is not available."""
    reason = fuse_unavailable()
    if reason is not None:
        pytest.skip(f"needs FUSE: {reason}")
    m = LazyMount(tmp_path / "mnt", tmp_path / "disk", tmp_path / "lazyfs.log")
    m.mount_sync()
    try:
        yield m
    finally:
        m.unmount_sync()
