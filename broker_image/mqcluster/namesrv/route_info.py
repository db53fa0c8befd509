"""Route tables of a name server (RocketMQ's RouteInfoManager), pure and clock-injected.

Tables:
  * ``cluster_addr``: clusterName -> brokerNames
  * ``broker_addr``: brokerName -> BrokerData (brokerId -> address)
  * ``topic_queue``: topic -> brokerName -> QueueData
  * ``live``: (clusterName, brokerAddr) -> BrokerLiveInfo

A broker is dropped when it unregisters, when it has not registered or
heartbeated for its timeout (found by :meth:`RouteInfoManager.scan_not_active_brokers`),
or at once when the connection it registered on closes
(:meth:`RouteInfoManager.on_channel_closed`). Channels are opaque hashable keys.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from mqcluster.protocol.namesrv import (
    MASTER_ID,
    PERM_WRITE,
    BrokerData,
    BrokerRegistration,
    ClusterInfo,
    DataVersion,
    QueueData,
    RegisterBrokerResult,
    TopicConfig,
    TopicRouteData,
)

DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS = 120_000

Clock = Callable[[], int]
"""Milliseconds from an arbitrary origin."""


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass
class BrokerLiveInfo:
    broker_name: str
    last_update_ms: int
    timeout_ms: int
    data_version: DataVersion
    ha_server_addr: str
    channel: Hashable | None


@dataclass(frozen=True)
class RemovedBroker:
    cluster_name: str
    broker_name: str
    broker_addr: str
    reason: str


class RouteInfoManager:
    def __init__(
        self,
        clock: Clock = monotonic_ms,
        *,
        broker_channel_expired_ms: int = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS,
        support_acting_master: bool = False,
        delete_topic_with_broker_registration: bool = False,
    ) -> None:
        self.clock = clock
        self.broker_channel_expired_ms = broker_channel_expired_ms
        self.support_acting_master = support_acting_master
        self.delete_topic_with_broker_registration = delete_topic_with_broker_registration
        self.cluster_addr: dict[str, set[str]] = {}
        self.broker_addr: dict[str, BrokerData] = {}
        self.topic_queue: dict[str, dict[str, QueueData]] = {}
        self.write_wiped: set[str] = set()
        self.live: dict[tuple[str, str], BrokerLiveInfo] = {}

    # ------------------------------------------------------------ registration

    def register_broker(
        self, reg: BrokerRegistration, channel: Hashable | None = None
    ) -> RegisterBrokerResult:
        self.cluster_addr.setdefault(reg.clusterName, set()).add(reg.brokerName)
        data = self.broker_addr.get(reg.brokerName)
        if data is None:
            data = BrokerData(cluster=reg.clusterName, brokerName=reg.brokerName)
            self.broker_addr[reg.brokerName] = data
        data.enableActingMaster = reg.enableActingMaster

        # One address has one id: a slave promoted to master re-registers as id 0.
        for bid in [i for i, a in data.brokerAddrs.items() if a == reg.brokerAddr]:
            if bid != reg.brokerId:
                _drop_id(data, bid)
        data.brokerAddrs[reg.brokerId] = reg.brokerAddr
        data.haServerAddrs[reg.brokerId] = reg.haServerAddr
        if reg.proxyAddr:
            data.proxyAddrs[reg.brokerId] = reg.proxyAddr
        else:
            data.proxyAddrs.pop(reg.brokerId, None)

        is_master = reg.brokerId == MASTER_ID
        is_prime_slave = not is_master and reg.brokerId == min(data.brokerAddrs)
        if is_master or is_prime_slave:
            self._apply_topics(reg, wipe_write=(is_prime_slave and reg.enableActingMaster)
                               or reg.brokerName in self.write_wiped)

        self.live[(reg.clusterName, reg.brokerAddr)] = BrokerLiveInfo(
            broker_name=reg.brokerName,
            last_update_ms=self.clock(),
            timeout_ms=reg.heartbeatTimeoutMillis or self.broker_channel_expired_ms,
            data_version=reg.dataVersion,
            ha_server_addr=reg.haServerAddr,
            channel=channel,
        )

        result = RegisterBrokerResult()
        if not is_master:
            master = data.brokerAddrs.get(MASTER_ID)
            master_live = self.live.get((reg.clusterName, master)) if master else None
            if master and master_live is not None:
                result = RegisterBrokerResult(
                    masterAddr=master, haServerAddr=master_live.ha_server_addr
                )
        return result

    def _apply_topics(self, reg: BrokerRegistration, *, wipe_write: bool) -> None:
        for name, cfg in reg.topicConfigTable.items():
            self.topic_queue.setdefault(name, {})[reg.brokerName] = _queue_data(
                reg.brokerName, cfg, wipe_write
            )
        if self.delete_topic_with_broker_registration and reg.brokerId == MASTER_ID:
            for topic in [
                t
                for t, queues in self.topic_queue.items()
                if reg.brokerName in queues and t not in reg.topicConfigTable
            ]:
                self._remove_queue(topic, reg.brokerName)

    def broker_heartbeat(self, cluster_name: str, broker_addr: str) -> bool:
        """Refresh a registered broker; False if it is not registered."""
        info = self.live.get((cluster_name, broker_addr))
        if info is None:
            return False
        info.last_update_ms = self.clock()
        return True

    def is_data_version_changed(
        self, cluster_name: str, broker_addr: str, version: DataVersion
    ) -> bool:
        info = self.live.get((cluster_name, broker_addr))
        return info is None or info.data_version != version

    # ------------------------------------------------------------ removal

    def unregister_broker(
        self, cluster_name: str, broker_name: str, broker_addr: str
    ) -> RemovedBroker | None:
        known = (cluster_name, broker_addr) in self.live or any(
            a == broker_addr for a in self._addrs_of(broker_name)
        )
        if not known:
            return None
        return self._remove(cluster_name, broker_name, broker_addr, "unregistered")

    def scan_not_active_brokers(self) -> list[RemovedBroker]:
        now = self.clock()
        expired = [
            (key, info)
            for key, info in self.live.items()
            if now - info.last_update_ms > info.timeout_ms
        ]
        return [
            self._remove(cluster, info.broker_name, addr, "expired")
            for (cluster, addr), info in expired
        ]

    def on_channel_closed(self, channel: Hashable) -> list[RemovedBroker]:
        gone = [(key, info) for key, info in self.live.items() if info.channel is channel]
        return [
            self._remove(cluster, info.broker_name, addr, "connection closed")
            for (cluster, addr), info in gone
        ]

    def _addrs_of(self, broker_name: str) -> list[str]:
        data = self.broker_addr.get(broker_name)
        return list(data.brokerAddrs.values()) if data else []

    def _remove(
        self, cluster_name: str, broker_name: str, broker_addr: str, reason: str
    ) -> RemovedBroker:
        self.live.pop((cluster_name, broker_addr), None)
        data = self.broker_addr.get(broker_name)
        if data is not None:
            for bid in [i for i, a in data.brokerAddrs.items() if a == broker_addr]:
                _drop_id(data, bid)
            if not data.brokerAddrs:
                del self.broker_addr[broker_name]
                names = self.cluster_addr.get(cluster_name)
                if names is not None:
                    names.discard(broker_name)
                    if not names:
                        del self.cluster_addr[cluster_name]
                for topic in [t for t, q in self.topic_queue.items() if broker_name in q]:
                    self._remove_queue(topic, broker_name)
        return RemovedBroker(cluster_name, broker_name, broker_addr, reason)

    def _remove_queue(self, topic: str, broker_name: str) -> None:
        queues = self.topic_queue.get(topic)
        if queues is None:
            return
        queues.pop(broker_name, None)
        if not queues:
            del self.topic_queue[topic]

    # ------------------------------------------------------------ admin

    def wipe_write_perm(self, broker_name: str) -> int:
        """Remove the write permission of a broker group on every topic; the count changed.
        It holds over the group's later registrations until ``add_write_perm``."""
        self.write_wiped.add(broker_name)
        n = 0
        for queues in self.topic_queue.values():
            qd = queues.get(broker_name)
            if qd is not None:
                qd.perm &= ~PERM_WRITE
                n += 1
        return n

    def add_write_perm(self, broker_name: str) -> int:
        """Give a broker group its write permission back on every topic; the count."""
        self.write_wiped.discard(broker_name)
        n = 0
        for queues in self.topic_queue.values():
            qd = queues.get(broker_name)
            if qd is not None:
                qd.perm |= PERM_WRITE
                n += 1
        return n

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        if cluster_name is None:
            self.topic_queue.pop(topic, None)
            return
        for name in self.cluster_addr.get(cluster_name, set()):
            self._remove_queue(topic, name)

    # ------------------------------------------------------------ queries

    def pickup_topic_route(self, topic: str) -> TopicRouteData | None:
        queues = self.topic_queue.get(topic)
        if not queues:
            return None
        queue_datas = [queues[name].model_copy() for name in sorted(queues)]
        broker_datas = [
            self.broker_addr[name].model_copy(deep=True)
            for name in sorted(queues)
            if name in self.broker_addr
        ]
        if not broker_datas:
            return None
        if self.support_acting_master:
            for data in broker_datas:
                _promote_acting_master(data)
        return TopicRouteData(queueDatas=queue_datas, brokerDatas=broker_datas)

    def cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            brokerAddrTable={
                name: self.broker_addr[name].model_copy(deep=True)
                for name in sorted(self.broker_addr)
            },
            clusterAddrTable={
                cluster: sorted(names) for cluster, names in sorted(self.cluster_addr.items())
            },
        )

    def topic_list(self) -> list[str]:
        return sorted(self.topic_queue)

    def topics_by_cluster(self, cluster_name: str) -> list[str]:
        names = self.cluster_addr.get(cluster_name, set())
        return sorted(t for t, queues in self.topic_queue.items() if names & queues.keys())


def _queue_data(broker_name: str, cfg: TopicConfig, wipe_write: bool) -> QueueData:
    perm = cfg.perm & ~PERM_WRITE if wipe_write else cfg.perm
    return QueueData(
        brokerName=broker_name,
        readQueueNums=cfg.readQueueNums,
        writeQueueNums=cfg.writeQueueNums,
        perm=perm,
        topicSysFlag=cfg.topicSysFlag,
    )


def _drop_id(data: BrokerData, broker_id: int) -> None:
    data.brokerAddrs.pop(broker_id, None)
    data.haServerAddrs.pop(broker_id, None)
    data.proxyAddrs.pop(broker_id, None)


def _promote_acting_master(data: BrokerData) -> None:
    """A group without a master shows its lowest-id replica as master (read-only)."""
    if not data.enableActingMaster or not data.brokerAddrs or MASTER_ID in data.brokerAddrs:
        return
    low = min(data.brokerAddrs)
    data.brokerAddrs[MASTER_ID] = data.brokerAddrs.pop(low)
    if low in data.proxyAddrs:
        data.proxyAddrs[MASTER_ID] = data.proxyAddrs.pop(low)
    if low in data.haServerAddrs:
        data.haServerAddrs[MASTER_ID] = data.haServerAddrs.pop(low)
