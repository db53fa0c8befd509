"""``mqcluster local up|status|down`` and the demo, as a user runs them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
pytestmark = pytest.mark.slow


def mqcluster(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mqcluster_operator.local.cli", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_up_status_down(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    files = ["-f", str(EXAMPLES / "controller-embedded.yaml"),
             "-f", str(EXAMPLES / "brokergroup-dledger.yaml")]
    try:
        up = mqcluster("local", "up", "--state-dir", state, *files)
        assert up.returncode == 0, up.stdout + up.stderr
        assert "up: 6 processes" in up.stdout
        again = mqcluster("local", "up", "--state-dir", state, *files)
        assert again.returncode == 1 and "already up" in again.stdout
        for _ in range(100):  # the group elects its leader after the processes boot
            status = mqcluster("local", "status", "--state-dir", state)
            if "master broker-b-" in status.stdout:
                break
        assert status.stdout.count(" alive") == 6, status.stdout
        assert "group broker-b (DLedger): master broker-b-" in status.stdout
    finally:
        down = mqcluster("local", "down", "--state-dir", state)
    assert down.returncode == 0 and "down: 6 processes stopped" in down.stdout
    assert not Path(state).exists()
    assert "no local cluster is up" in mqcluster("local", "status", "--state-dir",
                                                 state).stdout


def test_standalone_controllers_boot(tmp_path: Path) -> None:
    """mqcontroller prints "<id> started on <addr>": up waits for that, not for a line the
    controller never prints (which failed the boot after the timeout)."""
    state = str(tmp_path / "state")
    try:
        up = mqcluster("local", "up", "--state-dir", state, "-f",
                       str(EXAMPLES / "controller.yaml"))
        assert up.returncode == 0, up.stdout + up.stderr
        assert "up: 3 processes" in up.stdout
    finally:
        down = mqcluster("local", "down", "--state-dir", state)
    assert down.returncode == 0 and "down: 3 processes stopped" in down.stdout


def test_a_bad_manifest_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Deployment\nmetadata: {name: x}\n")
    res = mqcluster("local", "up", "--state-dir", str(tmp_path / "s"), "-f", str(bad))
    assert res.returncode == 2 and "only Controller and BrokerGroup" in res.stderr


def test_the_demo_runs_to_the_end() -> None:
    res = subprocess.run([sys.executable, "-m", "mqcluster_operator.local.demo"],
                         capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert res.stdout.count("none lost") == 2
    assert "broker-a (Controller mode)" in res.stdout
    assert "broker-b (DLedger mode)" in res.stdout
    assert "demo done: no acknowledged message lost" in res.stdout
