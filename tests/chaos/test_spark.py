"""The Spark history job reads the final master's store where the run left it."""

from __future__ import annotations

from pathlib import Path

from chaos.spark import master_store


def test_a_power_loss_runs_store_is_read_from_its_lazyfs_backing(tmp_path: Path) -> None:
    (tmp_path / "b1" / "store").mkdir(parents=True)  # the mount point, empty once unmounted
    (tmp_path / "b1" / "store.disk" / "commitlog").mkdir(parents=True)
    assert master_store(tmp_path, 1) == tmp_path / "b1" / "store.disk"


def test_a_plain_runs_store_is_read_where_the_broker_wrote_it(tmp_path: Path) -> None:
    (tmp_path / "b0" / "store" / "commitlog").mkdir(parents=True)
    assert master_store(tmp_path, 0) == tmp_path / "b0" / "store"
