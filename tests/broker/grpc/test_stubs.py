"""The servers load the official client's gRPC stubs without writing under HOME."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import sys
import {server}
print("client loaded:", "rocketmq.v5" in sys.modules, "opentelemetry" in sys.modules)
import os
print("home written:", os.path.exists(os.environ["HOME"]))
from rocketmq import Producer, SimpleConsumer
import rocketmq
print("client works:", Producer.__name__, rocketmq.grpc_protocol.Code.OK)
"""


@pytest.mark.parametrize("server", ["mqcluster.broker.grpc", "mqcluster.proxy.main"])
def test_servers_import_the_stubs_without_the_client_and_leave_home_alone(
    tmp_path: Path, server: str,
) -> None:
    home = tmp_path / "home"  # absent: the client's logging set-up would create it
    env = {**os.environ, "HOME": str(home)}
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(server=server)], env=env, capture_output=True,
        text=True, timeout=120, check=True,
    ).stdout.splitlines()
    assert out[0] == "client loaded: False False"
    assert out[1] == "home written: False"
    # The official client imported afterwards in the same process still works in full.
    assert out[2] == "client works: Producer 20000"
