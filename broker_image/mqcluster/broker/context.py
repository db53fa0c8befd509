"""What the parts of one broker process share: config, store, metrics, addresses."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

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


@dataclass
class BrokerContext:
    config: BrokerConfig
    store: MessageStore
    metrics: BrokerMetrics
    addresses: BrokerAddresses
    started_at: float = field(default_factory=time.time)
    master_addr: str | None = None
    serving: bool = False
    """True once every endpoint is up, False again when shutdown begins."""
    topic_listeners: list[Callable[[], None]] = field(default_factory=list)

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
        return cls(config=config, store=store, metrics=metrics, addresses=addresses)

    @property
    def broker_name(self) -> str:
        return self.config.brokerName

    @property
    def cluster_name(self) -> str:
        return self.config.brokerClusterName

    @property
    def broker_id(self) -> int:
        return self.config.brokerId

    def topics_changed(self) -> None:
        """Tell listeners (the name-server registrar) that topic configs changed."""
        for listener in list(self.topic_listeners):
            listener()
