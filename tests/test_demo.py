"""`make demo` runs these two modules; both must finish cleanly and say what they showed."""

import subprocess
import sys

import pytest


@pytest.mark.slow
@pytest.mark.parametrize(
    ("module", "expected"),
    [
        ("mqcluster.demo", "all 8 committed entries present, in order"),
        ("mqcluster.demo_cluster", "after restart the consumer receives:"),
    ],
)
def test_demo_runs_to_the_end(module: str, expected: str) -> None:
    res = subprocess.run(
        [sys.executable, "-m", module], capture_output=True, text=True, timeout=240
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert expected in res.stdout
    assert "== done" in res.stdout
