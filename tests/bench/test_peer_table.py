"""The peers table from fake measurements: rows, ratios, CPU sums, errors."""

from __future__ import annotations

from bench import Row
from bench.peer_table import ACKNOWLEDGED_WHEN, OURS, Ledger, Measured, peer_rows, ratio


def fake(system: str, scale: float) -> Measured:
    return Measured(system, p50_ms=1.0 * scale, p99_ms=4.0 * scale, pipelined=1000 * scale,
                    drain=5000 * scale, failover=[0.5 * scale, 0.2 * scale, 2.0 * scale],
                    acked=100, read=101, lost=0, duplicated=1,
                    cpu_us={"node1": 10 * scale, "node2": 5 * scale, "client": 100.0})


def by_metric(rows: list[Row], metric: str) -> Row:
    return next(r for r in rows if r.metric == metric)


def test_peer_rows_carry_each_mqcluster_mode_to_peer_ratio() -> None:
    rows = peer_rows([fake("mqcluster controller", 1), fake("mqcluster dledger", 2),
                      fake("NATS JetStream", 4)])
    nats = by_metric(rows, "NATS JetStream: pipelined publish")
    assert nats.value == 4000
    assert nats.note == ("mqcluster controller/NATS JetStream = 0.25; "
                         "mqcluster dledger/NATS JetStream = 0.50")
    assert by_metric(rows, "mqcluster controller: pipelined publish").note == ""


def test_failover_median_and_max_and_loss() -> None:
    rows = peer_rows([fake("mqcluster controller", 1)])
    assert by_metric(rows, "mqcluster controller: failover gap after leader SIGKILL "
                           "(median)").value == 0.5
    assert by_metric(rows, "mqcluster controller: failover gap after leader SIGKILL "
                           "(max)").value == 2.0
    lost = by_metric(rows, "mqcluster controller: acknowledged but lost (every phase, by "
                           "message id)")
    assert lost.value == 0 and lost.note == "100 acknowledged, 101 read back"
    twice = by_metric(rows, "mqcluster controller: read back more than once (duplicated)")
    assert twice.value == 1 and twice.note == "100 acknowledged, 101 read back"


def test_server_cpu_excludes_the_client() -> None:
    row = by_metric(peer_rows([fake("NATS JetStream", 1)]),
                    "NATS JetStream: server CPU per message (pipelined)")
    assert row.value == 15
    assert "node1 10, node2 5, client 100" in row.note


def test_a_peer_that_could_not_start_gets_one_row_with_the_error() -> None:
    rows = peer_rows([fake("mqcluster controller", 1),
                      Measured("RabbitMQ quorum queue", error="RuntimeError: boom")])
    failed = [r for r in rows if r.metric.startswith("RabbitMQ")]
    assert len(failed) == 1
    assert failed[0].value is None and failed[0].note == "RuntimeError: boom"


def test_each_system_says_what_its_acknowledgement_means() -> None:
    rows = peer_rows([fake("mqcluster dledger", 1), fake("NATS JetStream", 1),
                      Measured("RabbitMQ quorum queue", error="RuntimeError: boom")])
    said = {r.metric: r.note for r in rows if r.metric.endswith(": acknowledged when")}
    assert said == {"mqcluster dledger: acknowledged when": ACKNOWLEDGED_WHEN["mqcluster dledger"],
                    "NATS JetStream: acknowledged when": ACKNOWLEDGED_WHEN["NATS JetStream"]}
    assert set(ACKNOWLEDGED_WHEN) == {*OURS, "RabbitMQ quorum queue", "NATS JetStream"}


def test_ratio_of_missing_or_zero_is_not_available() -> None:
    assert ratio(None, 1.0) == "n/a"
    assert ratio(1.0, 0.0) == "n/a"
    assert ratio(3.0, 2.0) == "1.50"


def test_auto_batched_publish_is_compared_with_each_peers_pipelined_rate() -> None:
    ours = fake("mqcluster controller", 1)
    ours.pipelined_auto_batch = 6000.0
    ours.cpu_us_auto_batch = {"leader": 20.0, "client": 9.0}
    rows = peer_rows([ours, fake("mqcluster dledger", 2), fake("NATS JetStream", 4)])
    row = by_metric(rows, "mqcluster controller: pipelined publish, producer auto-batch")
    assert row.value == 6000
    assert row.note == ("vs NATS JetStream pipelined: 1.50; CPU us/msg: leader 20, client 9")
    assert not [r for r in rows if r.metric == "mqcluster dledger: pipelined publish, "
                                                "producer auto-batch"]  # not measured
    names = [r.metric for r in rows]
    assert names.index("mqcluster controller: pipelined publish, producer auto-batch") == \
        names.index("NATS JetStream: pipelined publish") + 1


def test_every_system_is_checked_by_message_id() -> None:
    rows = peer_rows([fake("NATS JetStream", 1), fake("RabbitMQ quorum queue", 1)])
    for system in ("NATS JetStream", "RabbitMQ quorum queue"):
        assert by_metric(rows, f"{system}: acknowledged but lost (every phase, by "
                               "message id)").note == "100 acknowledged, 101 read back"
        assert by_metric(rows, f"{system}: read back more than once (duplicated)").value == 1


def test_the_ledger_finds_what_a_count_would_hide() -> None:
    """Two acknowledged ids missing, and two others read twice: the counts agree (4 acked,
    4 read), the ids do not."""
    ledger = Ledger()
    ledger.ack([0, 1, 2, 3])
    ledger.read.update([0, 0, 1, 1])
    m = Measured("mqcluster dledger")
    ledger.settle(m)
    assert (m.acked, m.read, m.lost, m.duplicated) == (4, 4, 2, 2)
    ledger.read.update([2, 3])
    ledger.settle(m)
    assert (m.lost, m.duplicated) == (0, 2)
