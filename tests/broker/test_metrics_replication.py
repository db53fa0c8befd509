"""The broker's role, replication, disk and consumer-lag gauges (refreshed at scrape time)."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mqcluster.broker.metrics import BrokerMetrics, ReplicationView, ha_master_view
from mqcluster.ha.sync_state import SyncStateView
from mqcluster.store import FlushDiskType, MessageStore, StoreConfig
from mqcluster.store.message import MessageRecord

Key = tuple[str, tuple[tuple[str, str], ...]]


def samples(metrics: BrokerMetrics) -> dict[Key, float]:
    text = generate_latest(metrics.registry).decode()
    out: dict[Key, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            extra = tuple(sorted((k, v) for k, v in s.labels.items()
                                 if k not in ("cluster", "broker")))
            out[(s.name, extra)] = s.value
    return out


def named(metrics: BrokerMetrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: v for (n, labels), v in samples(metrics).items() if n == name}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_role_gauges_follow_the_broker_id_and_role() -> None:
    m = BrokerMetrics("c", "g")
    m.refresh_role(0, True, 3, 2, 4096)
    assert named(m, "rocketmq_broker_is_master") == {(("broker_id", "0"),): 1}
    assert named(m, "rocketmq_broker_master_epoch") == {(): 3}
    assert named(m, "rocketmq_broker_min_in_sync_replicas") == {(): 2}
    assert named(m, "rocketmq_broker_confirm_offset") == {(): 4096}
    # the controller assigned another id and the broker is a slave now: one series only
    m.refresh_role(2, False, 4, 2, None)
    assert named(m, "rocketmq_broker_is_master") == {(("broker_id", "2"),): 0}
    assert named(m, "rocketmq_broker_master_epoch") == {(): 4}


def test_becoming_master_is_counted_once_per_change() -> None:
    m = BrokerMetrics("c", "g")
    m.role_changed(False, True)
    m.role_changed(True, True)  # an epoch change while master: not a failover
    m.role_changed(True, False)
    m.role_changed(False, True)
    assert named(m, "rocketmq_broker_became_master_total") == {(): 2}


def test_controller_mode_view_exports_set_lag_and_seconds_then_clears_on_slave() -> None:
    view = SyncStateView(master_id=1, members={1, 2}, epoch=1, master_max=1000)
    view.connected(2, False, now_ms=5_000)
    view.connected(3, False, now_ms=5_000)
    view.acked(2, 1000, now_ms=6_000)  # caught up at 6 s
    view.acked(3, 400, now_ms=6_000)   # behind since it connected at 5 s

    class Master:
        def __init__(self, v: SyncStateView | None) -> None:
            self.view = v

        def now_ms(self) -> int:
            return 9_500

    m = BrokerMetrics("c", "g")
    m.refresh_replication(ha_master_view(Master(view)))  # type: ignore[arg-type]
    assert named(m, "rocketmq_ha_sync_state_set_size") == {(): 2}
    assert named(m, "rocketmq_ha_sync_state_set_member") == {
        (("broker_id", "1"),): 1, (("broker_id", "2"),): 1}
    assert named(m, "rocketmq_ha_slave_lag_bytes") == {
        (("slave", "2"),): 0, (("slave", "3"),): 600}
    assert named(m, "rocketmq_ha_slave_lag_seconds") == {
        (("slave", "2"),): 0.0, (("slave", "3"),): 4.5}
    # demoted: nothing of the old view remains
    m.refresh_replication(ha_master_view(Master(None)))  # type: ignore[arg-type]
    for name in ("rocketmq_ha_sync_state_set_size", "rocketmq_ha_sync_state_set_member",
                 "rocketmq_ha_slave_lag_bytes", "rocketmq_ha_slave_lag_seconds"):
        assert named(m, name) == {}, name


def test_master_slave_lag_seconds_count_from_the_last_scrape_whose_end_the_slave_has() -> None:
    clock = Clock()
    m = BrokerMetrics("c", "g", clock=clock)

    def scrape(master_end: int, slave_lag: int) -> float:
        m.refresh_replication(ReplicationView(lag_bytes={1: slave_lag},
                                              master_offset=master_end))
        return named(m, "rocketmq_ha_slave_lag_seconds")[(("slave", "1"),)]

    assert scrape(1000, 0) == 0.0          # t=100: caught up
    clock.now += 5
    assert scrape(2000, 300) == 5.0        # t=105: at 1700, still has what t=100 saw
    clock.now += 5
    # t=110: at 2900, past t=105's end: behind by a steady few bytes under load is
    # caught up 5 s ago, not 10 s and growing
    assert scrape(3000, 100) == 5.0
    clock.now += 5
    assert scrape(4000, 100) == 5.0        # t=115: at 3900, has t=110's end
    clock.now += 5
    # the slave stalls at 3900: it had t=110's end (3000), not t=115's (4000), and the
    # seconds grow while the master goes on
    assert scrape(6000, 2100) == 10.0      # t=120
    clock.now += 5
    assert scrape(8000, 4100) == 15.0      # t=125
    clock.now += 5
    assert scrape(8000, 0) == 0.0
    assert named(m, "rocketmq_ha_sync_state_set_size") == {}  # not controller mode


def test_a_slave_first_seen_behind_counts_from_that_scrape() -> None:
    clock = Clock()
    m = BrokerMetrics("c", "g", clock=clock)
    m.refresh_replication(ReplicationView(lag_bytes={}, master_offset=5000))
    clock.now += 3
    m.refresh_replication(ReplicationView(lag_bytes={2: 4000}, master_offset=5000))
    assert named(m, "rocketmq_ha_slave_lag_seconds") == {(("slave", "2"),): 0.0}
    clock.now += 3
    m.refresh_replication(ReplicationView(lag_bytes={2: 4000}, master_offset=5000))
    assert named(m, "rocketmq_ha_slave_lag_seconds") == {(("slave", "2"),): 3.0}
    m.refresh_replication(ReplicationView(lag_bytes={}, master_offset=5000))  # it left
    assert named(m, "rocketmq_ha_slave_lag_seconds") == {}


def test_consumer_lag_is_exported_under_both_names_and_dropped_groups_vanish() -> None:
    m = BrokerMetrics("c", "g")
    m.refresh_consumer_lag({("cg", "T"): 7, ("old", "T"): 1})
    m.refresh_consumer_lag({("cg", "T"): 5})
    want = {(("group", "cg"), ("topic", "T")): 5}
    assert named(m, "rocketmq_consumer_lag_messages") == want
    assert named(m, "rocketmq_group_diff") == want


async def test_every_commitlog_fsync_round_is_timed(tmp_path: Path) -> None:
    store = MessageStore(StoreConfig(storePathRootDir=str(tmp_path),
                                     flushDiskType=FlushDiskType.SYNC_FLUSH))
    m = BrokerMetrics("c", "g")
    store.observe_flushes(m.flush_latency.labels(**m.labels).observe)
    await store.start()
    try:
        for i in range(3):
            result = await store.put_message(MessageRecord("T", 0, f"m{i}".encode()))
            assert result.ok
        rounds = store.flush_rounds
    finally:
        await store.shutdown()
    assert rounds >= 1
    # the shutdown flushes nothing more: everything was on disk already
    assert named(m, "rocketmq_store_flush_seconds_count") == {(): rounds}
