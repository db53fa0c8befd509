"""``mqbroker`` on a store it cannot safely open: one line naming the path, exit 1, files kept."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mqcluster.client import AdminClient, Message, Producer
from mqcluster_testing.broker.procs import broker_props, free_ip, start_broker

pytestmark = pytest.mark.slow

SEGMENT = 1024 * 1024


def run_broker(tmp: Path, name: str, **props: str) -> subprocess.CompletedProcess[str]:
    values = broker_props(tmp, free_ip(), **{"maxMessageSize": "65536", **props})
    conf = tmp / f"{name}.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return subprocess.run([sys.executable, "-m", "mqcluster.broker.main", "-c", str(conf)],
                          capture_output=True, text=True, timeout=60)


def refusal(res: subprocess.CompletedProcess[str]) -> str:
    """The one line saying why the broker did not start (no traceback)."""
    assert res.returncode == 1, res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    lines = [line for line in res.stderr.splitlines() if line.startswith("mqbroker: ")]
    assert len(lines) == 1, res.stderr
    return lines[0]


async def test_two_brokers_sharing_a_commitlog_dir(tmp_path: Path) -> None:
    shared = tmp_path / "shared-commitlog"
    (tmp_path / "a").mkdir()
    first = await start_broker(tmp_path / "a", storePathRootDir=str(tmp_path / "a" / "store"),
                               storePathCommitLog=str(shared),
                               mappedFileSizeCommitLog=str(SEGMENT), maxMessageSize="65536")
    try:
        async with AdminClient(broker_addr=first.addr) as admin:
            await admin.create_topic("Shared", queue_nums=1)
        async with Producer("p", broker_addr=first.addr) as producer:
            sent = [await producer.send(Message("Shared", f"m{i}".encode())) for i in range(5)]
        before = (shared / f"{0:020d}").read_bytes()

        (tmp_path / "b").mkdir()
        line = refusal(run_broker(tmp_path / "b", "second",
                                  storePathRootDir=str(tmp_path / "b" / "store"),
                                  storePathCommitLog=str(shared),
                                  mappedFileSizeCommitLog=str(SEGMENT)))
        assert str(shared) in line and "in use by another store" in line
        assert first.proc is not None and f"pid {first.proc.pid}" in line
        assert (shared / f"{0:020d}").read_bytes() == before
        assert not (tmp_path / "b" / "store" / "consumequeue" / "Shared").exists()
        assert first.proc.returncode is None
        async with AdminClient(broker_addr=first.addr) as admin:
            assert await admin.max_offset("Shared", 0) == len(sent)
    finally:
        await first.kill()


def store_with_segments(root: Path, starts: list[int], size: int = SEGMENT) -> Path:
    """A store holding only commitlog segments (sparse, zero) at ``starts``."""
    commitlog = root / "commitlog"
    commitlog.mkdir(parents=True)
    for start in starts:
        with open(commitlog / f"{start:020d}", "wb") as f:
            f.truncate(size)
    return commitlog


def test_a_changed_segment_size(tmp_path: Path) -> None:
    commitlog = store_with_segments(tmp_path / "store", [0, SEGMENT])
    line = refusal(run_broker(tmp_path, "bigger", mappedFileSizeCommitLog=str(2 * SEGMENT)))
    assert f"mappedFileSizeCommitLog={2 * SEGMENT}" in line
    assert f"mappedFileSizeCommitLog={SEGMENT}" in line
    assert [p.stat().st_size for p in sorted(commitlog.iterdir())] == [SEGMENT, SEGMENT]


@pytest.mark.parametrize("case", ["larger segment", "missing segment", "bad name",
                                  "truncated checkpoint"])
def test_a_malformed_store_layout(tmp_path: Path, case: str) -> None:
    root = tmp_path / "store"
    commitlog = store_with_segments(root, [0, 2 * SEGMENT] if case == "missing segment" else [0])
    named = {
        "larger segment": commitlog / f"{0:020d}",
        "missing segment": commitlog / f"{SEGMENT:020d}",
        "bad name": commitlog / "00000000000001048576.old",
        "truncated checkpoint": root / "checkpoint",
    }[case]
    if case == "larger segment":
        with open(named, "r+b") as f:
            f.truncate(SEGMENT + 1)
    elif case in ("bad name", "truncated checkpoint"):
        named.write_bytes(b"\0" * 12)
    line = refusal(run_broker(tmp_path, case.replace(" ", "-"),
                              mappedFileSizeCommitLog=str(SEGMENT)))
    assert (named.name if case == "missing segment" else str(named)) in line
