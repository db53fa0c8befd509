"""The peers bench's hang and partition rows, and the partition it makes."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.partition import Partitions, unavailable
from bench.peer_table import FaultGaps, Measured, peer_rows

ECHO = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
while True:
    c, _ = s.accept()
    while data := c.recv(100):
        c.sendall(data)
"""


def rows_of(*measured: Measured) -> dict[str, tuple[float | None, str]]:
    return {r.metric: (r.value, r.note) for r in peer_rows(list(measured))}


def test_hang_and_partition_rows_for_every_system_say_how_each_fault_ended() -> None:
    ours = Measured("mqcluster controller", hang=FaultGaps([1.9, 2.1, 2.4]),
                    partition=FaultGaps([2.2, 2.0, 2.6]))
    peer = Measured("NATS JetStream", hang=FaultGaps([3.0, 20.5, 4.0], after_heal=1))
    rows = rows_of(ours, peer)
    assert rows["mqcluster controller: failover gap after leader SIGSTOP (median)"] == (
        2.1, "max 2.40 s over 3; every one resumed while the fault held")
    value, note = rows["NATS JetStream: failover gap after leader SIGSTOP (median)"]
    assert value == 4.0
    assert note.startswith("max 20.50 s over 3; 1 of 3 resumed only once undone")
    assert "mqcluster controller/NATS JetStream = 0.53" in note
    value, note = rows[
        "NATS JetStream: failover gap after a network partition of the leader (median)"]
    assert value is None and note.startswith("not measured")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def connects(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def in_thread(body: Callable[[], None]) -> None:
    """``body`` on a thread of its own: entering the bench's network namespace moves only
    the calling thread, so pytest's own stays where it is."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            body()
        except BaseException as e:
            failure.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join(120)
    assert not t.is_alive()
    if failure:
        raise failure[0]


@pytest.mark.skipif(unavailable() is not None, reason=f"partitions: {unavailable()}")
def test_a_cut_node_neither_sends_nor_receives_until_healed(tmp_path: Path) -> None:
    def body() -> None:
        parts = Partitions()
        parts.enter(tmp_path)
        try:
            port, other = free_port(), free_port()
            cut = subprocess.Popen([sys.executable, "-c", ECHO, str(port)],
                                   preexec_fn=parts.preexec("echo-0"))
            # A Python child joins by its command line (as the mqcluster brokers do).
            parts.python_child("echo-1", "marker-echo-1")
            kept = subprocess.Popen([sys.executable, "-c", ECHO, str(other), "marker-echo-1"])
            try:
                deadline = time.monotonic() + 30
                while not (connects(port) and connects(other)):
                    assert time.monotonic() < deadline, "echo servers did not start"
                    time.sleep(0.1)
                assert parts.pids("echo-0") == [cut.pid]
                assert parts.pids("echo-1") == [kept.pid]
                open_conn = socket.create_connection(("127.0.0.1", port), timeout=1)
                open_conn.sendall(b"a")
                assert open_conn.recv(10) == b"a"

                parts.cut("echo-0")
                assert not connects(port), "a new connection to the cut node"
                open_conn.sendall(b"b")
                with pytest.raises(TimeoutError):
                    open_conn.recv(10)
                assert connects(other), "the other node is not cut"
                assert parts.dropped_packets() > 0

                parts.heal()
                assert connects(port)
            finally:
                for p in (cut, kept):
                    p.kill()
                    p.wait()
        finally:
            parts.close()
        assert not parts.base.exists(), "the cgroups are removed"

    in_thread(body)


def test_cutting_a_node_with_no_process_is_refused(tmp_path: Path) -> None:
    if unavailable() is not None:
        pytest.skip(f"partitions: {unavailable()}")

    def body() -> None:
        parts = Partitions()
        parts.enter(tmp_path)
        try:
            with pytest.raises(RuntimeError, match="no process in ghost-0's cgroup"):
                parts.cut("ghost-0")
        finally:
            parts.close()

    in_thread(body)
