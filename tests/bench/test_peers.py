"""The peers bench's table and ratios, on made-up measurements (no servers here)."""

from __future__ import annotations

from pathlib import Path

from bench.peer_servers import NatsCluster
from bench.peers_bench import Result, gap_after, percentile, rows_for


def test_gap_after_a_fault_spans_the_last_ack_before_it() -> None:
    acks = [1.0, 1.1, 1.2, 2.5, 2.6, 2.7, 2.8]
    assert gap_after(acks, 1.25) == 2.5 - 1.2
    assert gap_after([1.0, 1.1], 5.0) == 0.0


def test_percentile() -> None:
    values = [float(i) for i in range(1, 101)]
    assert percentile(values, 0.5) == 51.0 and percentile(values, 0.99) == 100.0


def test_table_has_every_system_ratios_to_peers_and_says_why_one_is_missing() -> None:
    ours = Result("mqcluster", 1.0, 2.0, 40_000.0, 80_000.0, [0.1, 0.2, 0.3], 0, 20.0)
    nats = Result("NATS", 0.5, 1.5, 20_000.0, 60_000.0, [4.0, 5.0, 6.0], 0, 30.0)
    rabbit = Result("RabbitMQ", error="rabbitmq-server did not start: epmd refused")
    rows = {r.metric: r for r in rows_for([ours, nats, rabbit])}
    assert rows["mqcluster / NATS: pipelined throughput"].value == 2.0
    assert rows["mqcluster / NATS: failover gap (median)"].value == 0.2 / 5.0
    assert rows["RabbitMQ: not measured"].note.startswith("rabbitmq-server did not start")
    assert "acknowledged but lost: 0" in rows["NATS: failover gap after SIGKILL of the "
                                             "leader (median)"].note
    assert not any(k.startswith("mqcluster / RabbitMQ") for k in rows)


def test_nats_config_routes_to_the_other_servers(tmp_path: Path) -> None:
    c = NatsCluster(tmp_path)
    conf = c.config(1, "127.0.0.5:4222", "127.0.0.5:6222",
                    ["127.0.0.4:6222", "127.0.0.5:6222", "127.0.0.6:6222"], "127.0.0.5:8222")
    assert 'server_name: "n1"' in conf and 'listen: "127.0.0.5:4222"' in conf
    assert "nats-route://127.0.0.4:6222" in conf and "nats-route://127.0.0.6:6222" in conf
    assert "nats-route://127.0.0.5:6222" not in conf
    assert str(tmp_path / "n1") in conf
