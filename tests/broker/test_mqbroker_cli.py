from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from mqcluster_testing.broker.procs import free_port, start_broker


def run_broker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mqcluster.broker.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("listenPort=99999", "listenPort"),
        ("brokerRole=BOSS", "brokerRole"),
        ("flushDiskType=NEVER", "flushDiskType"),
        ("brokerRole=SLAVE", "brokerId"),
    ],
)
def test_bad_config_fails_with_one_line_naming_the_key(tmp_path: Path, line: str, key: str) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerName=broker-a\nstorePathRootDir={tmp_path}/store\n{line}\n")
    res = run_broker("-c", str(conf))
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert f"'{key}'" in lines[0] and lines[0].startswith("mqbroker: ")
    assert not (tmp_path / "store").exists()


def test_missing_config_file(tmp_path: Path) -> None:
    res = run_broker("-c", str(tmp_path / "nope.conf"))
    assert res.returncode != 0
    assert "nope.conf" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_print_config(tmp_path: Path) -> None:
    res = run_broker("-n", "127.0.0.1:9876", "-p")
    assert res.returncode == 0
    assert "namesrvAddr=127.0.0.1:9876" in res.stdout.splitlines()


def test_printed_config_loads_back_as_a_file(tmp_path: Path) -> None:
    """What ``-p`` prints is a config file: unset names are comments, not empty values."""
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerName=broker-a\nstorePathRootDir={tmp_path}/store\n")
    printed = run_broker("-c", str(conf), "-p")
    assert printed.returncode == 0, printed.stderr
    again = tmp_path / "printed.conf"
    again.write_text(printed.stdout)
    res = run_broker("-c", str(again), "-p")
    assert res.returncode == 0, res.stderr
    assert res.stdout == printed.stdout


async def test_second_broker_on_same_store_or_port_fails_with_one_line(tmp_path: Path) -> None:
    broker = await start_broker(tmp_path)
    try:
        same_store = {**broker.props, "listenPort": str(free_port(broker.ip))}
        conf = tmp_path / "second.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in same_store.items()))
        res = await asyncio.to_thread(run_broker, "-c", str(conf))
        assert res.returncode == 1
        last = res.stderr.strip().splitlines()[-1]
        assert last.startswith("mqbroker: cannot start:")
        assert "is in use by another store" in last

        same_port = {**broker.props, "storePathRootDir": str(tmp_path / "other")}
        conf.write_text("".join(f"{k}={v}\n" for k, v in same_port.items()))
        res = await asyncio.to_thread(run_broker, "-c", str(conf))
        assert res.returncode == 1
        assert "address already in use" in res.stderr.strip().splitlines()[-1]
    finally:
        await broker.kill()
