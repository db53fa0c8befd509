"""``mqcluster local status --watch``: the view's parts on fixed input, and the command
against a running local cluster."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from mqcluster.broker.metrics import BrokerMetrics
from mqcluster_operator.local.watch import (
    GroupView,
    Rates,
    ReplicaView,
    Scrape,
    parse_metrics,
    render,
)

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_a_brokers_metrics_give_its_role_offset_and_message_totals() -> None:
    m = BrokerMetrics("c", "g")
    m.record_put("A", 3, 30, 0.001)
    m.record_put("B", 2, 20, 0.001)
    m.record_get("A", 4, 40)
    m.refresh_role(1, True, 2, 1, None)
    m.commitlog_max_offset.labels(**m.labels).set(4096)
    got = parse_metrics(generate_latest(m.registry).decode())
    assert got == Scrape(is_master=True, max_offset=4096, messages_in=5, messages_out=4)


def view(*replicas: ReplicaView, master: str | None = "g-0") -> GroupView:
    return GroupView("g", "Controller", master, 2, ("g-0", "g-1"), replicas)


def test_rates_come_from_each_replicas_counters_never_below_zero() -> None:
    rates = Rates()
    first = view(ReplicaView("g-0", True, Scrape(True, 0, 100, 10)),
                 ReplicaView("g-1", True, Scrape(False, 0, 0, 50)))
    assert rates.update(first, 10.0) is None  # one look: no rate yet
    second = view(ReplicaView("g-0", True, Scrape(True, 0, 300, 30)),
                  ReplicaView("g-1", True, Scrape(False, 0, 0, 70)))
    assert rates.update(second, 12.0) == (100.0, 20.0)
    # g-0 killed, g-1 restarted (its counters start again): neither counts as negative
    third = view(ReplicaView("g-0", False, None),
                 ReplicaView("g-1", True, Scrape(True, 0, 40, 5)), master="g-1")
    assert rates.update(third, 14.0) == (20.0, 0.0)


def test_the_view_names_master_epoch_in_sync_replicas_and_each_replicas_state() -> None:
    text = render([view(ReplicaView("g-0", False, None),
                        ReplicaView("g-1", True, Scrape(True, 8192, 0, 0)),
                        ReplicaView("g-2", True, None), master="g-1"),
                   GroupView("d", "DLedger", None, 3, (), (), error=None),
                   GroupView("x", "?", None, 0, (), (), error="no controller answers")],
                  {"g": (12.4, 3.0)}, "12:00:00")
    lines = text.splitlines()
    assert "12:00:00" in lines[0]
    assert lines[2] == ("g (Controller): master g-1, epoch 2, in sync 2/3 [g-0, g-1], "
                        "in 12 msg/s, out 3 msg/s")
    assert lines[3].split() == ["g-0", "DEAD", "in", "sync"]
    assert lines[4].split() == ["g-1", "MASTER", "offset", "8192", "in", "sync"]
    assert lines[5].split() == ["g-2", "no", "answer"]
    assert ("d (DLedger): master NONE, term 3, in sync 0/0 [none], in - msg/s, out - msg/s"
            in lines)
    assert "x: cannot ask who leads: no controller answers" in lines


def mqcluster(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mqcluster_operator.local.cli", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_a_watch_interval_must_be_positive() -> None:
    res = mqcluster("local", "status", "--watch", "--interval", "0")
    assert res.returncode == 2 and "must be above 0" in res.stderr


@pytest.mark.slow
def test_watch_shows_the_groups_of_a_running_cluster(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    files = ["-f", str(EXAMPLES / "controller-embedded.yaml"),
             "-f", str(EXAMPLES / "brokergroup-controller.yaml")]
    try:
        up = mqcluster("local", "up", "--state-dir", state, *files)
        assert up.returncode == 0, up.stdout + up.stderr
        for _ in range(60):  # until the group has its master and every replica in sync
            res = mqcluster("local", "status", "--state-dir", state, "--watch",
                            "--iterations", "2", "--interval", "0.5")
            assert res.returncode == 0, res.stderr
            if "in sync 3/3" in res.stdout:
                break
        views = res.stdout.split("mqcluster local status --watch")[1:]
        assert len(views) == 2 and "\x1b[2J" not in res.stdout  # not a terminal: no redraw
        last = views[-1]
        assert "broker-a (Controller): master broker-a-" in last
        assert re.search(r"epoch [1-9]\d*, in sync 3/3", last), last
        assert last.count("MASTER") == 1 and last.count("slave") == 2
        assert "in 0 msg/s, out 0 msg/s" in last  # the second view has rates
    finally:
        mqcluster("local", "down", "--state-dir", state)
