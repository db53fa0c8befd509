"""Proxy configuration: RocketMQ-style keys, validated with the key named."""

from __future__ import annotations

from pydantic import Field, model_validator

from mqcluster.common.config import RocketConfig


class ProxyConfig(RocketConfig):
    brokerName: str = Field(min_length=1)
    """The broker group this proxy serves."""
    bindAddress: str = "0.0.0.0"
    grpcServerPort: int = Field(default=8081, ge=0, le=65535)
    controllerAddr: str = ""
    """Controller mode: the controllers' addresses (``a;b;c``); the master comes from them."""
    namesrvAddr: str = ""
    """Other modes: the name servers; the master is the group's brokerId 0 there."""
    masterPollIntervalMs: int = Field(default=100, gt=0)
    """Milliseconds between looks at who the master is."""
    masterWaitMs: int = Field(default=3000, ge=0)
    """How long a call waits for a reachable master before it fails UNAVAILABLE."""
    metricsPromExporterPort: int = Field(default=0, ge=0, le=65535)
    """Port of ``/metrics`` and ``/health``; 0 serves none."""
    metricsPromExporterHost: str = ""
    """Where they listen; ``bindAddress`` when empty."""

    @model_validator(mode="after")
    def _one_source(self) -> ProxyConfig:
        if not self.controllerAddr and not self.namesrvAddr:
            raise ValueError("set controllerAddr (controller mode) or namesrvAddr "
                             "(DLedger and master-slave modes)")
        return self
