"""Proxy configuration: RocketMQ-style keys, validated with the key named."""

from __future__ import annotations

from pydantic import Field, model_validator

from mqcluster.common.config import RocketConfig


class ProxyConfig(RocketConfig):
    brokerName: str | None = Field(default=None, min_length=1)
    """Serve this broker group only; unset: every group the controllers or name servers
    know (RocketMQ 5's Proxy in cluster mode)."""
    brokerClusterName: str | None = Field(default=None, min_length=1)
    """Unset: groups of every cluster; set: only groups the name servers list under it."""
    bindAddress: str = "0.0.0.0"
    grpcServerPort: int = Field(default=8081, ge=0, le=65535)
    controllerAddr: str = ""
    """Controller mode: the controllers' addresses (``a;b;c``); masters come from them."""
    namesrvAddr: str = ""
    """The name servers: every group's registered brokers and gRPC endpoints, and the
    master of a DLedger or master-slave group (its brokerId 0)."""
    masterPollIntervalMs: int = Field(default=100, gt=0)
    """Milliseconds between looks at the masters where no watch is held (name servers, or
    controllers that do not serve WATCH_MASTERS)."""
    namesrvPollIntervalMs: int = Field(default=1000, gt=0)
    """Milliseconds between reads of the name servers' cluster table (groups, endpoints)."""
    masterWaitMs: int = Field(default=3000, ge=0)
    """How long a call for a group with no usable master waits for one before it fails."""
    callTimeoutMs: int = Field(default=1000, gt=0)
    """Deadline of one call forwarded to a master (long polls excepted): a master that
    does not answer in time (a hung process keeps its TCP open) fails the call fast."""
    probeIntervalMs: int = Field(default=250, gt=0)
    """Milliseconds between health probes of each group's master."""
    probeTimeoutMs: int = Field(default=500, gt=0)
    """A probe not answered in this time counts as a failure."""
    probeFailures: int = Field(default=2, ge=1)
    """Consecutive failures (probes or forwarded calls past their deadline) after which a
    group's master counts as unreachable: its calls fail fast, sends go to other groups."""
    drainMs: int = Field(default=5000, ge=0)
    """On SIGTERM: how long calls in flight may finish while /health says DRAINING."""
    metricsPromExporterPort: int = Field(default=0, ge=0, le=65535)
    """Port of ``/metrics`` and ``/health``; 0 serves none."""
    metricsPromExporterHost: str = ""
    """Where they listen; ``bindAddress`` when empty."""

    @model_validator(mode="after")
    def _one_source(self) -> ProxyConfig:
        if not self.controllerAddr and not self.namesrvAddr:
            raise ValueError("set controllerAddr (controller mode) or namesrvAddr "
                             "(DLedger and master-slave modes), or both")
        return self
