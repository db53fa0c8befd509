"""The strict verdict: store copies matched against the producer's attempts, checks that
cannot read what they check fail, history lines that are not events are reported."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from chaos.check import check, read_events
from chaos.cluster import TOPIC, ChaosCluster
from chaos.controller_mode import ControllerCluster
from chaos.netns import Network
from chaos.process import HostProcess
from mqcluster.store.checkpoint import Checkpoint, save_checkpoint


@dataclass
class Stored:
    body: bytes
    uniq_key: str
    queue_offset: int
    topic: str = TOPIC
    queue_id: int = 0


class FakeCluster:
    """The reference store and the replica check, without processes."""

    def __init__(self, stored: list[Stored], promises_no_loss: bool = True,
                 power_losses: list[int] | None = None) -> None:
        self.stored = stored
        self.promises_no_loss = promises_no_loss
        self.power_losses = power_losses or []

    def messages(self, i: int) -> list[Stored]:
        return self.stored

    def position(self, m: Stored) -> str:
        return str(m.queue_offset)

    def message_group(self, m: Stored) -> str | None:
        return None

    def replicas_identical(self) -> tuple[bool, str]:
        return True, "identical"


def history(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def ev(event: str, key: str, **fields: Any) -> dict[str, Any]:
    return {"event": event, "key": key, "time_ms": 1000, **fields}


def verdict(tmp_path: Path, producer: list[dict[str, Any]], stored: list[Stored],
            cluster: FakeCluster | None = None) -> Any:
    stored_keys = {m.body.decode() for m in stored}
    consumer = [ev("receive", k, group="G", message_group=None, seq=None)
                for k in {e["key"] for e in producer if e["event"] == "ack"} & stored_keys]
    paths = [history(tmp_path / "producer.jsonl", producer),
             history(tmp_path / "consumer.jsonl", consumer)]
    return check(cast(ChaosCluster, cluster or FakeCluster(stored)), 0, paths)


TWO_COPIES = [Stored(b"p0-g0-0", "m1", 0), Stored(b"p0-g0-0", "m1", 1)]


def test_a_copy_the_client_never_retried_fails_the_verdict(tmp_path: Path) -> None:
    v = verdict(tmp_path, [ev("send", "p0-g0-0", attempt=1), ev("ack", "p0-g0-0")],
                TWO_COPIES)
    assert v.duplicated == ["p0-g0-0"] and v.retried == []
    assert not v.ok


def test_a_copy_the_client_retried_is_at_least_once(tmp_path: Path) -> None:
    v = verdict(tmp_path, [ev("send", "p0-g0-0", attempt=1), ev("send", "p0-g0-0", attempt=2),
                           ev("ack", "p0-g0-0")], TWO_COPIES)
    assert v.retried == ["p0-g0-0"] and v.duplicated == []
    assert v.ok, v


def test_a_send_after_the_ack_explains_no_copy(tmp_path: Path) -> None:
    v = verdict(tmp_path, [ev("send", "p0-g0-0"), ev("ack", "p0-g0-0"), ev("send", "p0-g0-0")],
                TWO_COPIES)
    assert v.duplicated == ["p0-g0-0"]


def test_a_history_line_that_is_no_event_fails_unless_it_is_the_last(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"event":"ack","key":"a"}\nnot json\n{"event":"ack","key":"b"}\n'
                    '{"event":"ack","ke')
    unreadable: list[str] = []
    events = read_events([path, tmp_path / "missing.jsonl"], unreadable)
    assert [e["key"] for e in events] == ["a", "b"]
    assert unreadable == ["p.jsonl line 2: 'not json'", "missing.jsonl: missing"]


def test_an_unreadable_history_fails_the_verdict(tmp_path: Path) -> None:
    paths = [tmp_path / "producer.jsonl", tmp_path / "consumer.jsonl"]
    paths[1].write_text("")
    v = check(cast(ChaosCluster, FakeCluster([])), 0, paths)
    assert v.unreadable == ["producer.jsonl: missing"]
    assert not v.ok


def controller_stores(tmp_path: Path, confirms: list[int | None]) -> ControllerCluster:
    cluster = ControllerCluster(Network(), tmp_path)
    for i, confirm in enumerate(confirms):
        store = tmp_path / f"b{i}" / "store"
        (store / "commitlog").mkdir(parents=True)
        (store / "commitlog" / "00000000000000000000").write_bytes(b"x" * 100 + b"\0" * 28)
        if confirm is not None:
            save_checkpoint(str(store / "checkpoint"), Checkpoint(confirm_phy_offset=confirm))
        cluster.broker_props.append({"storePathRootDir": str(store)})
    cluster.brokers = cast(list[HostProcess], [None] * len(confirms))
    return cluster


def test_controller_replicas_compare_up_to_the_confirm_offset(tmp_path: Path) -> None:
    same, detail = controller_stores(tmp_path, [100, 90, 100]).replicas_identical()
    assert same, detail
    assert detail == "identical up to 100 (confirmOffset 100)"


def test_a_confirm_offset_that_cannot_be_read_fails_the_replica_check(tmp_path: Path) -> None:
    same, detail = controller_stores(tmp_path, [100, None, 100]).replicas_identical()
    assert not same
    assert detail.startswith("confirmOffset of b1 cannot be read")


LOST_TO_POWER = [ev("send", "p0-g0-0"), ev("ack", "p0-g0-0"),
                 ev("send", "p0-g0-1"), {**ev("ack", "p0-g0-1"), "time_ms": 1700}]


def test_an_acknowledged_message_lost_fails_a_mode_that_promises_to_keep_it(
        tmp_path: Path) -> None:
    stored = [Stored(b"p0-g0-0", "m0", 0)]
    v = verdict(tmp_path, LOST_TO_POWER, stored, FakeCluster(stored, True, [2000]))
    assert v.lost == ["p0-g0-1"] and not v.ok


def test_async_flush_loss_is_measured_instead_of_failing(tmp_path: Path) -> None:
    stored = [Stored(b"p0-g0-0", "m0", 0)]
    v = verdict(tmp_path, LOST_TO_POWER, stored, FakeCluster(stored, False, [2000]))
    assert v.lost == ["p0-g0-1"] and v.unconsumed == ["p0-g0-1"]
    assert v.loss_allowed and v.loss_windows_ms == [300]
    assert v.ok
