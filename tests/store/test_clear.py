"""Clearing a store for a mode migration: keeps the named files, runs once per id."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqcluster.store.clear import ClearError, clear_store, main

KEEP = ["config/topics.json", "config/subscriptionGroup.json"]


def dledger_store(root: Path) -> None:
    for rel, text in {
        "config/topics.json": '{"topicConfigTable": {"T": {}}}',
        "config/topics.json.bak": "{}",
        "config/subscriptionGroup.json": '{"subscriptionGroupTable": {"G": {}}}',
        "config/consumerOffset.json": "{}",
        "dledger/data/00000000000000000000": "entries",
        "dledger/term.checkpoint": "3",
        "consumequeue/T/0/00000000000000000000": "cq",
        "checkpoint": "x",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()
            and not p.name.startswith(".mqcluster-cleared-")}


def test_everything_but_the_kept_configs_goes(tmp_path: Path) -> None:
    dledger_store(tmp_path)
    removed = clear_store(tmp_path, "m1", KEEP)
    assert files(tmp_path) == {"config/topics.json", "config/topics.json.bak",
                               "config/subscriptionGroup.json"}
    assert "dledger" in removed and "config/consumerOffset.json" in removed
    assert (tmp_path / "config/topics.json").read_text() == '{"topicConfigTable": {"T": {}}}'


def test_a_second_run_for_the_same_id_keeps_what_the_new_mode_wrote(tmp_path: Path) -> None:
    dledger_store(tmp_path)
    clear_store(tmp_path, "m1", KEEP)
    (tmp_path / "commitlog").mkdir()
    (tmp_path / "commitlog/00000000000000000000").write_text("controller-mode data")
    (tmp_path / "epochFileCheckpoint").write_text("1 0")
    assert clear_store(tmp_path, "m1", KEEP) == []
    assert (tmp_path / "commitlog/00000000000000000000").exists()
    assert clear_store(tmp_path, "m2", KEEP) == ["commitlog", "epochFileCheckpoint"]


def test_an_empty_or_missing_store_is_fine(tmp_path: Path) -> None:
    assert clear_store(tmp_path / "fresh", "m1", KEEP) == []
    assert (tmp_path / "fresh/.mqcluster-cleared-m1").exists()


@pytest.mark.parametrize(("mid", "keep"), [("", KEEP), ("../x", KEEP), ("m1", ["../etc"]),
                                           ("m1", ["."])])
def test_requests_that_would_clear_the_wrong_thing_are_refused(
        tmp_path: Path, mid: str, keep: list[str]) -> None:
    dledger_store(tmp_path)
    with pytest.raises(ClearError):
        clear_store(tmp_path, mid, keep)
    assert "dledger/term.checkpoint" in files(tmp_path)


def test_the_command_names_the_bad_argument(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", str(tmp_path), "--id", "m1", "--keep", "/etc/passwd"]) == 2
    assert "--keep '/etc/passwd'" in capsys.readouterr().err
    assert main(["--store", str(tmp_path), "--id", "m1", "--keep", "config/topics.json"]) == 0
