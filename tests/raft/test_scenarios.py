"""Data-driven traces of DLedgerLeaderElector's election rules (testdata/*.txt).

Run with REWRITE=1 to regenerate the expected output, then review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.raft.script import run_file

TESTDATA = Path(__file__).parent / "testdata"
SCENARIOS = sorted(TESTDATA.glob("*.txt"))


def test_scenario_files_exist() -> None:
    assert SCENARIOS


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario(path: Path) -> None:
    expected, actual = run_file(path)
    if os.environ.get("REWRITE") == "1":
        path.write_text(actual)
        return
    assert actual == expected
