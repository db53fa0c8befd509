"""What the parts of one broker process share: config, store, metrics, addresses."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mqcluster.broker.config import BrokerConfig
from mqcluster.broker.metrics import BrokerMetrics

if TYPE_CHECKING:
    from mqcluster.store.api import MessageStore


@dataclass
class BrokerAddresses:
    """Advertised ``host:port`` of every endpoint this broker serves."""

    broker: str
    ha: str
    grpc: str | None = None
    metrics: str | None = None


@dataclass(frozen=True)
class ReplicaRole:
    """Who this broker is in its group right now; replaced whole on every change.

    In master-slave mode it comes from the config; in controller mode from the
    controller (ReplicasManager); in DLedger mode from the Raft leadership.
    """

    broker_id: int
    is_master: bool
    master_addr: str | None = None
    """Internal RPC ``host:port`` of the group's master (None while unknown)."""
    master_grpc: str | None = None
    """gRPC endpoint of the master, where a replica forwards client calls."""
    master_epoch: int = 0

    @property
    def name(self) -> str:
        return "MASTER" if self.is_master else "SLAVE"


RoleListener = Callable[[ReplicaRole, ReplicaRole], None]


@dataclass
class BrokerContext:
    config: BrokerConfig
    store: MessageStore
    metrics: BrokerMetrics
    addresses: BrokerAddresses
    started_at: float = field(default_factory=time.time)
    role: ReplicaRole = field(default_factory=lambda: ReplicaRole(0, True))
    serving: bool = False
    """True once every endpoint is up, False again when shutdown begins."""
    topic_listeners: list[Callable[[], None]] = field(default_factory=list)
    topic_publishers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """Waits until the name servers have been sent the current topics."""
    role_listeners: list[RoleListener] = field(default_factory=list)
    config_listeners: list[Callable[[BrokerConfig], None]] = field(default_factory=list)
    client_sessions: Callable[[], list[dict[str, Any]]] = list
    """The gRPC endpoint's connected clients (kind, group, topics), for mqadmin."""
    ha_lag: Callable[[], dict[int, int]] = dict
    """Bytes each slave is behind this master (empty elsewhere), for the metrics."""

    @classmethod
    def create(cls, config: BrokerConfig, store: MessageStore) -> BrokerContext:
        ip = config.advertised_ip
        addresses = BrokerAddresses(
            broker=f"{ip}:{config.listenPort}",
            ha=config.ha_addr,
            grpc=f"{ip}:{config.grpcServerPort}" if config.enableProxy else None,
            metrics=f"{ip}:{config.metricsPromExporterPort}" if config.metrics_enabled else None,
        )
        metrics = BrokerMetrics(config.brokerClusterName, config.brokerName)
        role = ReplicaRole(config.brokerId, config.is_master,
                           addresses.broker if config.is_master else None,
                           addresses.grpc if config.is_master else None)
        return cls(config=config, store=store, metrics=metrics, addresses=addresses, role=role)

    @property
    def broker_name(self) -> str:
        return self.config.brokerName

    @property
    def cluster_name(self) -> str:
        return self.config.brokerClusterName

    @property
    def broker_id(self) -> int:
        return self.role.broker_id

    @property
    def master_addr(self) -> str | None:
        return self.role.master_addr

    def update_config(self, config: BrokerConfig) -> None:
        """A runtime config change (mqadmin updateBrokerConfig): tell whoever cached it."""
        self.config = config
        for listener in list(self.config_listeners):
            listener(config)
        self.topics_changed()  # the permission and queue numbers go to the name servers

    def set_role(self, role: ReplicaRole) -> None:
        """Switch to ``role`` and tell the listeners (registration re-registers at once)."""
        old, self.role = self.role, role
        if old == role:
            return
        for listener in list(self.role_listeners):
            listener(old, role)

    async def topics_published(self) -> None:
        """Wait (up to registerBrokerTimeoutMills) until the name servers have the topics.

        As in RocketMQ, an admin topic change answers only after registering it, so a
        client asking the name server right after sees the topic; a name server that
        does not answer in time is left to the periodic registration.
        """
        if not self.topic_publishers:
            return
        timeout = self.config.registerBrokerTimeoutMills / 1000.0
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                asyncio.gather(*(publish() for publish in self.topic_publishers)), timeout
            )

    def topics_changed(self) -> None:
        """Tell listeners (the name-server registrar) that topic configs changed."""
        for listener in list(self.topic_listeners):
            listener()
