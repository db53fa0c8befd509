from __future__ import annotations

from mqcluster.namesrv.route_info import RouteInfoManager
from mqcluster.protocol.namesrv import (
    PERM_READ,
    PERM_WRITE,
    BrokerRegistration,
    TopicConfig,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def reg(
    name: str = "broker-a",
    bid: int = 0,
    addr: str = "10.0.0.1:10911",
    *,
    cluster: str = "DefaultCluster",
    topics: dict[str, int] | None = None,
    timeout: int | None = None,
    acting: bool = False,
    ha: str = "",
    proxy: str = "",
) -> BrokerRegistration:
    return BrokerRegistration(
        clusterName=cluster,
        brokerName=name,
        brokerAddr=addr,
        brokerId=bid,
        haServerAddr=ha,
        proxyAddr=proxy,
        heartbeatTimeoutMillis=timeout,
        enableActingMaster=acting,
        topicConfigTable={
            t: TopicConfig(topicName=t, readQueueNums=n, writeQueueNums=n)
            for t, n in (topics if topics is not None else {"TopicTest": 4}).items()
        },
    )


def make(
    *, support_acting_master: bool = False, delete_topic_with_broker_registration: bool = False
) -> tuple[RouteInfoManager, FakeClock]:
    clock = FakeClock()
    rim = RouteInfoManager(
        clock,
        broker_channel_expired_ms=120_000,
        support_acting_master=support_acting_master,
        delete_topic_with_broker_registration=delete_topic_with_broker_registration,
    )
    return rim, clock


def test_register_and_route_query() -> None:
    rim, _ = make()
    rim.register_broker(reg(ha="10.0.0.1:10912", proxy="10.0.0.1:8081"))
    rim.register_broker(reg(bid=1, addr="10.0.0.2:10911", ha="10.0.0.2:10912"))
    rim.register_broker(reg("broker-b", 0, "10.0.0.3:10911", topics={"TopicTest": 8, "Other": 2}))

    route = rim.pickup_topic_route("TopicTest")
    assert route is not None
    assert [(q.brokerName, q.readQueueNums, q.perm) for q in route.queueDatas] == [
        ("broker-a", 4, PERM_READ | PERM_WRITE),
        ("broker-b", 8, PERM_READ | PERM_WRITE),
    ]
    a, b = route.brokerDatas
    assert a.brokerAddrs == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
    assert a.proxyAddrs == {0: "10.0.0.1:8081"}
    assert a.cluster == "DefaultCluster"
    assert b.brokerAddrs == {0: "10.0.0.3:10911"}

    other = rim.pickup_topic_route("Other")
    assert other is not None
    assert [d.brokerName for d in other.brokerDatas] == ["broker-b"]
    assert rim.pickup_topic_route("Missing") is None
    assert rim.topic_list() == ["Other", "TopicTest"]


def test_route_is_a_copy() -> None:
    rim, _ = make()
    rim.register_broker(reg())
    route = rim.pickup_topic_route("TopicTest")
    assert route is not None
    route.brokerDatas[0].brokerAddrs[7] = "x"
    again = rim.pickup_topic_route("TopicTest")
    assert again is not None and 7 not in again.brokerDatas[0].brokerAddrs


def test_cluster_info_and_topics_by_cluster() -> None:
    rim, _ = make()
    rim.register_broker(reg("broker-a", topics={"T1": 1}))
    rim.register_broker(reg("broker-b", 0, "10.0.0.3:10911", cluster="C2", topics={"T2": 1}))
    info = rim.cluster_info()
    assert info.clusterAddrTable == {"C2": ["broker-b"], "DefaultCluster": ["broker-a"]}
    assert info.brokerAddrTable["broker-b"].brokerAddrs == {0: "10.0.0.3:10911"}
    assert info.master_addrs("C2") == ["10.0.0.3:10911"]
    assert sorted(info.master_addrs()) == ["10.0.0.1:10911", "10.0.0.3:10911"]
    assert rim.topics_by_cluster("C2") == ["T2"]


def test_slave_learns_master_and_does_not_override_topics() -> None:
    rim, _ = make()
    first = rim.register_broker(reg(bid=1, addr="10.0.0.2:10911", topics={"T": 2}))
    assert first.masterAddr == ""
    rim.register_broker(reg(ha="10.0.0.1:10912", topics={"T": 4}))
    res = rim.register_broker(reg(bid=1, addr="10.0.0.2:10911", topics={"T": 2}))
    assert res.masterAddr == "10.0.0.1:10911"
    assert res.haServerAddr == "10.0.0.1:10912"
    route = rim.pickup_topic_route("T")
    assert route is not None and route.queueDatas[0].readQueueNums == 4


def test_expiry_by_scan_with_fake_clock() -> None:
    rim, clock = make()
    rim.register_broker(reg())
    rim.register_broker(reg(bid=1, addr="10.0.0.2:10911"))
    clock.advance(60_000)
    rim.register_broker(reg(bid=1, addr="10.0.0.2:10911"))
    clock.advance(60_000)
    assert rim.scan_not_active_brokers() == []
    clock.advance(1)
    removed = rim.scan_not_active_brokers()
    assert [(r.broker_addr, r.reason) for r in removed] == [("10.0.0.1:10911", "expired")]
    route = rim.pickup_topic_route("TopicTest")
    assert route is not None and route.brokerDatas[0].brokerAddrs == {1: "10.0.0.2:10911"}

    clock.advance(60_000)
    assert [r.broker_addr for r in rim.scan_not_active_brokers()] == ["10.0.0.2:10911"]
    assert rim.pickup_topic_route("TopicTest") is None
    assert rim.cluster_info().clusterAddrTable == {}
    assert rim.topic_list() == []


def test_heartbeat_and_per_broker_timeout() -> None:
    rim, clock = make()
    rim.register_broker(reg(timeout=10_000))
    clock.advance(9_000)
    assert rim.broker_heartbeat("DefaultCluster", "10.0.0.1:10911")
    assert not rim.broker_heartbeat("DefaultCluster", "10.9.9.9:1")
    clock.advance(9_000)
    assert rim.scan_not_active_brokers() == []
    clock.advance(1_001)
    assert len(rim.scan_not_active_brokers()) == 1


def test_connection_close_drops_only_its_brokers() -> None:
    rim, _ = make()
    chan_a, chan_b = object(), object()
    rim.register_broker(reg(), chan_a)
    rim.register_broker(reg("broker-b", 0, "10.0.0.3:10911"), chan_b)
    removed = rim.on_channel_closed(chan_a)
    assert [(r.broker_name, r.reason) for r in removed] == [("broker-a", "connection closed")]
    route = rim.pickup_topic_route("TopicTest")
    assert route is not None and [d.brokerName for d in route.brokerDatas] == ["broker-b"]
    assert rim.on_channel_closed(chan_a) == []


def test_reregister_on_new_channel_survives_old_channel_close() -> None:
    rim, _ = make()
    old, new = object(), object()
    rim.register_broker(reg(), old)
    rim.register_broker(reg(), new)
    assert rim.on_channel_closed(old) == []
    assert rim.pickup_topic_route("TopicTest") is not None


def test_unregister() -> None:
    rim, _ = make()
    rim.register_broker(reg())
    assert rim.unregister_broker("DefaultCluster", "broker-a", "10.0.0.9:1") is None
    removed = rim.unregister_broker("DefaultCluster", "broker-a", "10.0.0.1:10911")
    assert removed is not None and removed.reason == "unregistered"
    assert rim.pickup_topic_route("TopicTest") is None


def test_slave_promoted_to_master_keeps_one_entry_per_address() -> None:
    rim, _ = make()
    rim.register_broker(reg(addr="10.0.0.1:10911"))
    rim.register_broker(reg(bid=1, addr="10.0.0.2:10911"))
    rim.unregister_broker("DefaultCluster", "broker-a", "10.0.0.1:10911")
    rim.register_broker(reg(bid=0, addr="10.0.0.2:10911"))
    info = rim.cluster_info()
    assert info.brokerAddrTable["broker-a"].brokerAddrs == {0: "10.0.0.2:10911"}


def test_prime_slave_topics_without_master_and_acting_master() -> None:
    rim, _ = make(support_acting_master=True)
    rim.register_broker(reg(bid=2, addr="10.0.0.2:10911", acting=True))
    rim.register_broker(reg(bid=3, addr="10.0.0.3:10911", acting=True))
    route = rim.pickup_topic_route("TopicTest")
    assert route is not None
    assert route.queueDatas[0].perm == PERM_READ
    assert route.brokerDatas[0].brokerAddrs == {0: "10.0.0.2:10911", 3: "10.0.0.3:10911"}


def test_delete_topic_with_broker_registration() -> None:
    rim, _ = make(delete_topic_with_broker_registration=True)
    rim.register_broker(reg(topics={"A": 1, "B": 1}))
    rim.register_broker(reg(topics={"A": 1}))
    assert rim.topic_list() == ["A"]
    keep, _ = make()
    keep.register_broker(reg(topics={"A": 1, "B": 1}))
    keep.register_broker(reg(topics={"A": 1}))
    assert keep.topic_list() == ["A", "B"]


def test_wipe_write_perm_and_delete_topic() -> None:
    rim, _ = make()
    rim.register_broker(reg(topics={"A": 1, "B": 1}))
    assert rim.wipe_write_perm("broker-a") == 2
    route = rim.pickup_topic_route("A")
    assert route is not None and route.queueDatas[0].perm == PERM_READ
    rim.delete_topic("A")
    assert rim.topic_list() == ["B"]
    rim.delete_topic("B", "DefaultCluster")
    assert rim.topic_list() == []
