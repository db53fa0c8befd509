"""Hosts in namespaces reach each other until a partition cuts a pair, and everything
is gone after ``close()``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from chaos.netns import Host, Network, ip

pytestmark = pytest.mark.usefixtures("netns")

CONNECT = "import socket, sys; socket.create_connection((sys.argv[1], 8000), timeout=1)"


def reaches(src: Host | None, dst: Host) -> bool:
    argv = [sys.executable, "-c", CONNECT, dst.address]
    return subprocess.run(src.command(argv) if src else argv, capture_output=True).returncode == 0


def test_partition_heal_isolate_and_cleanup() -> None:
    net = Network()
    try:
        net.create()
        a, b, c = (net.add_host(n) for n in "abc")
        server = subprocess.Popen(b.command([sys.executable, "-m", "http.server", "-b",
                                             b.address, "8000"]),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert server.stdout is not None
        server.stdout.readline()  # "Serving HTTP on ...": listening
        assert reaches(a, b) and reaches(c, b) and reaches(None, b)
        net.partition(a, b)
        assert not reaches(a, b)
        assert reaches(c, b), "only the pair is cut"
        net.heal(a, b)
        assert reaches(a, b)
        net.isolate(b)
        assert not reaches(a, b) and not reaches(None, b)
        net.rejoin(b)
        assert reaches(a, b)
    finally:
        names = [h.ns for h in net.hosts.values()]
        net.close()
    assert server.wait(10) == -9, "close() killed what ran in the namespaces"
    listed = ip("netns", "list")
    assert not any(n in listed for n in names)
