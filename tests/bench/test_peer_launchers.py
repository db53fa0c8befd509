"""Config rendering of the peers' 3-node clusters (no servers started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.peer_launchers import (
    nats_conf,
    nats_nodes,
    rabbit_conf,
    rabbit_env,
    rabbit_nodes,
)


def test_rabbit_nodes_know_each_other_and_keep_their_own_dirs(tmp_path: Path) -> None:
    nodes = rabbit_nodes(tmp_path, [5671, 5672, 5673], [25671, 25672, 25673], "run7")
    conf = rabbit_conf(nodes[1], nodes)
    assert "listeners.tcp.default = 127.0.0.1:5672\n" in conf
    assert "cluster_formation.peer_discovery_backend = classic_config" in conf
    for i, n in enumerate(nodes):
        assert f"cluster_formation.classic_config.nodes.{i + 1} = {n.name}" in conf
    env = rabbit_env(nodes[2], tmp_path / "home", 4400)
    assert env["RABBITMQ_NODENAME"] == "rabbit-run7-3@localhost"
    assert env["RABBITMQ_DIST_PORT"] == "25673"
    assert env["ERL_EPMD_PORT"] == "4400"
    assert env["HOME"] == str(tmp_path / "home")
    paths = [v for k, v in env.items() if k.endswith(("_FILE", "_BASE"))]
    assert paths and all(p.startswith(str(tmp_path / "rabbit3")) for p in paths)


def test_nats_nodes_route_to_all_and_store_in_their_own_dir(tmp_path: Path) -> None:
    nodes = nats_nodes(tmp_path, [4222, 4223, 4224], [6222, 6223, 6224])
    conf = nats_conf(nodes[0], nodes)
    assert "server_name: n1\n" in conf
    assert "listen: 127.0.0.1:4222\n" in conf
    assert f'store_dir: "{tmp_path / "nats1" / "js"}"' in conf
    assert "listen: 127.0.0.1:6222" in conf
    for port in (6222, 6223, 6224):
        assert f"nats-route://127.0.0.1:{port}" in conf


def test_mismatched_port_lists_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="one cluster port per client port"):
        nats_nodes(tmp_path, [1, 2, 3], [4, 5])
    with pytest.raises(ValueError, match="one dist port per AMQP port"):
        rabbit_nodes(tmp_path, [1, 2], [4, 5, 6])
