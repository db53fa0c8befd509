"""Test support shared by the tests (``tests/``) and the benchmarks (``bench/``).

Not part of any distribution or image: it is importable from the repository root, as
``bench`` and ``chaos`` are. It holds the harnesses that stand in for what a test or a
benchmark needs around the code under test:

- ``procs``: free loopback addresses and child processes that never leak (pytest fixture
  ``procs``);
- ``broker.procs``, ``ha``, ``proxy.cluster``, ``controller.localcluster``,
  ``raft.localgroup``: clusters of real ``mqnamesrv`` / ``mqbroker`` / ``mqproxy`` /
  ``mqcontroller`` / ``mqraft`` processes, and in-process HA groups; ``raft.client``
  talks to ``mqraft``;
- ``controller.standin``, ``namesrv.standin``: brokers reduced to their protocol, for the
  controller and the name server;
- ``operator``: the Kubernetes emulator (kmock), its kubelet, the real control plane's node
  agent, and the operator run in-process against either.

Child processes that run one of these modules (``python -m mqcluster_testing...``) get
the repository root on their path from ``child_env``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""The repository root: where ``mqcluster_testing``, ``bench`` and ``chaos`` import from."""


def child_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with the repository root first on
    PYTHONPATH, so that ``python -m mqcluster_testing...`` runs from any directory."""
    env = dict(os.environ if base is None else base)
    rest = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + rest if rest else "")
    return env
