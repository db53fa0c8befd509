from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from mqcluster.store import MessageStore

from .conftest import make_config

WRITER = Path(__file__).with_name("crash_writer.py")
ACKS_BEFORE_KILL = 400


def run_and_kill(root: Path, round_no: int) -> list[tuple[int, str, int, int, str]]:
    """Start the writer, SIGKILL it once it has acknowledged enough, return the acks."""
    proc = subprocess.Popen([sys.executable, str(WRITER), str(root), str(round_no)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    acks: list[tuple[int, str, int, int, str]] = []
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first == b"READY\n", first + (proc.stderr.read() if proc.stderr else b"")
        while len(acks) < ACKS_BEFORE_KILL:
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else b"writer died"
            acks.append(_parse(line))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        acks.extend(_parse(line) for line in proc.stdout.read().splitlines(keepends=True)
                    if line.endswith(b"\n"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert proc.returncode == -signal.SIGKILL
    return acks


def _parse(line: bytes) -> tuple[int, str, int, int, str]:
    tag, offset, topic, qid, qoff, key = line.decode().split()
    assert tag == "ACK"
    return int(offset), topic, int(qid), int(qoff), key


@pytest.mark.slow
def test_acknowledged_messages_survive_sigkill(tmp_path: Path) -> None:
    root = tmp_path / "store"
    acked = run_and_kill(root, 1) + run_and_kill(root, 2)

    store = MessageStore(make_config(root, mappedFileSizeCommitLog=64 * 1024,
                                     mappedFileSizeConsumeQueue=20 * 100))
    store.open()
    try:
        for offset, topic, qid, qoff, key in acked:
            msg = store.get_message_by_offset(offset)
            assert msg is not None, f"acknowledged {key} at {offset} is gone"
            assert (msg.topic, msg.queue_id, msg.queue_offset, msg.keys) == (
                topic, qid, qoff, [key])

        seen: Counter[str] = Counter()
        in_queues = 0
        for topic, qid in store.queues():
            assert store.min_offset(topic, qid) == 0
            cq = store._queues.get(topic, qid)
            assert cq is not None
            for queue_offset in range(cq.max_offset):
                entry = cq.entry(queue_offset)
                assert entry is not None and not entry.blank
                msg = store.get_message_by_offset(entry.commitlog_offset)
                assert msg is not None and msg.store_size == entry.size
                assert (msg.topic, msg.queue_id, msg.queue_offset) == (topic, qid, queue_offset)
                seen[msg.keys[0]] += 1
                in_queues += 1
        assert not [k for k, n in seen.items() if n > 1]
        assert {a[4] for a in acked} <= set(seen)

        offset, in_log = store.commitlog_min_offset, 0
        while offset < store.commitlog_max_offset:
            msg = store.get_message_by_offset(offset)
            if msg is None:
                offset = (offset // (64 * 1024) + 1) * 64 * 1024
                continue
            in_log += 1
            offset = msg.next_commitlog_offset
        assert in_log == in_queues
    finally:
        store.close()
