"""A broker as DLedger member n0 of a group whose other members never start: for tests
that put a hostile file in its store and watch it refuse to start."""

from __future__ import annotations

from pathlib import Path

from mqcluster_testing.broker.procs import broker_props
from mqcluster_testing.procs import Procs, free_addr
from tests.raft.hostile import host_of


def refused_start(tmp_path: Path, procs: Procs) -> str:
    """Starts the broker on the store under ``tmp_path`` (prepared beforehand) and returns
    its output, once it has exited 1 without a traceback."""
    ip = host_of(free_addr())
    peers = f"n0-{free_addr(ip)};n1-{free_addr()};n2-{free_addr()}"
    props = broker_props(tmp_path, ip, brokerName="dledger-a", enableDLegerCommitLog="true",
                         dLegerGroup="dledger-a", dLegerPeers=peers, dLegerSelfId="n0")
    conf = tmp_path / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    p = procs.python("-m", "mqcluster.broker.main", "-c", str(conf), name="broker")
    assert p.wait(timeout=90) == 1
    out = procs.output(p)
    assert "Traceback" not in out, out
    return out
