"""Controller configuration, RocketMQ key names (RocketMQ's controller-mode deployment
guide, "Controller 部署").

The controller serves brokers, admin tools and its Raft peers on one address:
its own entry of ``controllerDLegerPeers`` (as RocketMQ's DLedger controller
reuses the DLedger remoting server). Without ``controllerDLegerPeers`` it is a
single controller at ``127.0.0.1:<listenPort>``.

Failure-detection defaults: brokers heartbeat every 500 ms (their
``brokerHeartbeatInterval``) and carry their ``controllerHeartBeatTimeoutMills``
(2000 ms) in each heartbeat; a broker that sends none gets
``brokerHeartbeatTimeoutMills`` = 2000 ms. The scan of not-active brokers runs
every ``scanNotActiveBrokerInterval`` = 250 ms, so a hung or cut-off master is
acted on 2.0-2.25 s after its last heartbeat (1.5-2.25 s after it stopped) and
replaced within 3 s; a stall shorter than 1.5 s is not a failover. A master
whose connection closes is acted on at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from mqcluster.common.config import ConfigError, build_config, load_config
from mqcluster.wire.server_keys import ServerLimitKeys


def parse_peers(spec: str) -> dict[str, str]:
    """``n0-127.0.0.1:9877;n1-127.0.0.1:9878`` -> ``{"n0": "127.0.0.1:9877", ...}``."""
    peers: dict[str, str] = {}
    for part in spec.split(";"):
        part = part.strip()
        if not part:
            continue
        node_id, sep, addr = part.partition("-")
        host, colon, port = addr.rpartition(":")
        if not sep or not node_id or not colon or not host or not port.isdigit():
            raise ValueError(f"peer {part!r} is not id-host:port")
        if node_id in peers:
            raise ValueError(f"peer id {node_id!r} appears twice")
        peers[node_id] = addr
    return peers


def format_peers(peers: dict[str, str]) -> str:
    return ";".join(f"{k}-{v}" for k, v in peers.items())


class ControllerConfig(ServerLimitKeys):
    """The remoting limits (serverFrameMaxLength, ...) are ``ServerLimitKeys``: they apply
    to the controller's one port, which its Raft peers share."""

    listenPort: int = Field(default=9878, ge=0, le=65535)
    metricsPromExporterPort: int = Field(default=0, ge=0, le=65535)
    """0: no metrics endpoint."""
    metricsPromExporterHost: str = "0.0.0.0"
    controllerType: Literal["DLedger"] = "DLedger"
    controllerDLegerGroup: str = "mqcontroller"
    controllerDLegerPeers: str = ""
    controllerDLegerSelfId: str = "n0"
    controllerStorePath: str = str(Path.home() / "DledgerController")
    enableElectUncleanMaster: bool = False
    notifyBrokerRoleChanged: bool = True
    scanNotActiveBrokerInterval: int = Field(default=250, gt=0)
    """A scan is a walk over the heartbeat table: cheap even every 250 ms, and it
    bounds how late after the timeout a dead master is seen."""
    brokerHeartbeatTimeoutMills: int = Field(default=2000, gt=0)
    controllerRequestTimeoutMills: int = Field(default=5000, gt=0)
    """How long a write waits for its events to be applied."""
    snapshotThreshold: int = Field(default=1000, ge=0)
    """Applied log entries between Raft snapshots (0: never)."""

    @field_validator("controllerDLegerPeers")
    @classmethod
    def _peers_parse(cls, v: str) -> str:
        parse_peers(v)
        return v

    @model_validator(mode="after")
    def _self_in_peers(self) -> ControllerConfig:
        if self.controllerDLegerPeers:
            peers = parse_peers(self.controllerDLegerPeers)
            if self.controllerDLegerSelfId not in peers:
                raise ValueError(
                    f"controllerDLegerSelfId {self.controllerDLegerSelfId!r} is not one of "
                    f"controllerDLegerPeers ({', '.join(peers)})"
                )
        return self

    @classmethod
    def from_properties(cls, props: dict[str, str], source: str = "<config>") -> ControllerConfig:
        """The controller keys of a larger properties set (e.g. the name server's, when it
        embeds the controller with ``enableControllerInNamesrv=true``); others are ignored."""
        known = {k: v for k, v in props.items() if k in cls.model_fields}
        try:
            return build_config(cls, known, source)
        except ValueError as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"{source}: {exc}") from None

    @property
    def peers(self) -> dict[str, str]:
        if self.controllerDLegerPeers:
            return parse_peers(self.controllerDLegerPeers)
        return {self.controllerDLegerSelfId: f"127.0.0.1:{self.listenPort}"}

    @property
    def self_addr(self) -> str:
        return self.peers[self.controllerDLegerSelfId]

    @property
    def store_dir(self) -> Path:
        return Path(self.controllerStorePath)


def load_controller_config(
    path: str | Path | None, overrides: dict[str, str] | None = None
) -> ControllerConfig:
    try:
        return load_config(ControllerConfig, path, overrides)
    except ValueError as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(str(exc)) from None
