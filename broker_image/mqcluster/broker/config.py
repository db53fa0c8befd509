"""Broker configuration: RocketMQ's broker keys, validated.

Field names are RocketMQ's own (``brokerClusterName``, ``listenPort``,
``flushDiskType``...). Single-value rules (ports, enums, positive sizes) are
pydantic constraints; rules that involve several keys live in
``cross_field_problems`` and are raised by ``load_broker_config`` (or
``check_broker_config``) as a ConfigError naming the key.
"""

from __future__ import annotations

import os
import re
import socket
from enum import StrEnum
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator

from mqcluster.auth.credentials import credentials_of
from mqcluster.common.config import ConfigError, load_config
from mqcluster.wire.frame import DEFAULT_MAX_FRAME_SIZE
from mqcluster.wire.server_keys import ServerLimitKeys

Port = Annotated[int, Field(ge=1, le=65535)]
PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]

MASTER_ID = 0
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024
FRAME_OVERHEAD = 64 * 1024
"""Room for a message's header and properties in a frame beyond its body."""

_ADDR_RE = re.compile(r"^[A-Za-z0-9_.\-\[\]:]+:\d{1,5}$")
# the id ends at the first "-", as DLedger reads it: pod DNS names carry "-" too
_PEER_RE = re.compile(r"^([A-Za-z0-9_]+)-([A-Za-z0-9_.\-\[\]:]+:\d{1,5})$")


SECRET_KEYS = frozenset({"initAuthenticationUser", "innerClientAuthenticationCredentials"})
"""Keys holding passwords: never answered to GET_BROKER_CONFIG in clear."""


class BrokerRole(StrEnum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


class FlushDiskType(StrEnum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


class MetricsExporterType(StrEnum):
    DISABLE = "DISABLE"
    PROM = "PROM"


def split_addr_list(value: str | None) -> list[str]:
    """``"a:9876;b:9876"`` -> ``["a:9876", "b:9876"]`` (blank entries dropped)."""
    if not value:
        return []
    return [part.strip() for part in value.split(";") if part.strip()]


def _check_addr_list(value: str | None) -> str | None:
    for addr in split_addr_list(value):
        if not _ADDR_RE.match(addr):
            raise ValueError(f"{addr!r} is not host:port (list separated by ';')")
        port = int(addr.rsplit(":", 1)[1])
        if not 1 <= port <= 65535:
            raise ValueError(f"port of {addr!r} is outside 1..65535")
    return value


def parse_dledger_peers(value: str | None) -> dict[str, str]:
    """``"n0-127.0.0.1:40911;n1-..."`` -> ``{"n0": "127.0.0.1:40911", ...}``."""
    peers: dict[str, str] = {}
    for entry in split_addr_list(value):
        m = _PEER_RE.match(entry)
        if m is None:
            raise ValueError(f"{entry!r} is not id-host:port (list separated by ';')")
        if m.group(1) in peers:
            raise ValueError(f"peer id {m.group(1)!r} appears twice")
        peers[m.group(1)] = m.group(2)
    return peers


def _default_store_root() -> str:
    return str(Path.home() / "store")


class BrokerConfig(ServerLimitKeys):
    """The remoting limits (serverFrameMaxLength, ...) are ``ServerLimitKeys``; they apply
    to the remoting port and, in DLedger mode, to the Raft port."""

    # identity
    brokerClusterName: str = Field(default="DefaultCluster", min_length=1)
    brokerName: str = Field(default_factory=socket.gethostname, min_length=1)
    brokerId: NonNegativeInt = MASTER_ID
    brokerRole: BrokerRole = BrokerRole.ASYNC_MASTER
    brokerPermission: Annotated[int, Field(ge=0, le=7)] = 6

    # network
    namesrvAddr: str | None = Field(default_factory=lambda: os.environ.get("NAMESRV_ADDR"))
    brokerIP1: str | None = None
    brokerIP2: str | None = None
    bindAddress: str = "0.0.0.0"
    listenPort: Port = 10911
    haListenPort: Port = 10912
    enableProxy: bool = True
    grpcRouteAccessPoint: bool = False
    grpcServerPort: Port = 8081
    metricsExporterType: MetricsExporterType = MetricsExporterType.PROM
    metricsPromExporterHost: str | None = None
    metricsPromExporterPort: Port = 5557
    registerNameServerPeriod: PositiveInt = 30000
    brokerNotActiveTimeoutMillis: PositiveInt = 120000
    registerBrokerTimeoutMills: PositiveInt = 6000

    # ACL 2.0 (RocketMQ 5.3's keys): users and policies are read from config/acl.json
    # in the store; the two JSON keys are {"username": ..., "password": ...}
    authenticationEnabled: bool = False
    authorizationEnabled: bool = False
    initAuthenticationUser: str | None = None
    innerClientAuthenticationCredentials: str | None = None
    authenticationDateTimeToleranceSeconds: PositiveInt = 900

    # store
    storePathRootDir: str = Field(default_factory=_default_store_root, min_length=1)
    storePathCommitLog: str | None = None
    mappedFileSizeCommitLog: PositiveInt = 1024 * 1024 * 1024
    mappedFileSizeConsumeQueue: PositiveInt = 300000 * 20
    flushDiskType: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    flushIntervalCommitLog: PositiveInt = 500
    flushIntervalConsumeQueue: PositiveInt = 1000
    syncFlushTimeout: PositiveInt = 5000
    maxMessageSize: PositiveInt = DEFAULT_MAX_MESSAGE_SIZE
    fileReservedTime: PositiveInt = 72
    deleteWhen: str = "04"
    diskMaxUsedSpaceRatio: Annotated[int, Field(ge=10, le=95)] = 75

    # topics
    autoCreateTopicEnable: bool = True
    autoCreateSubscriptionGroup: bool = True
    defaultTopicQueueNums: Annotated[int, Field(ge=1, le=1024)] = 8
    maxTopicQueueNums: Annotated[int, Field(ge=1, le=65536)] = 1024
    maxPullBatchSize: Annotated[int, Field(ge=1, le=65536)] = 1024

    # master-slave and controller-mode HA (RIP-44)
    enableControllerMode: bool = False
    controllerAddr: str | None = None
    controllerDeployedStandAlone: bool = False
    syncBrokerMetadataPeriod: PositiveInt = 5000
    checkSyncStateSetPeriod: PositiveInt = 5000
    syncControllerMetadataPeriod: PositiveInt = 10000
    # Failure detection (a hung or cut-off master replaced within 3 s): a heartbeat every
    # 500 ms, declared dead after 2 s of silence. Four beats per timeout: a broker, its
    # network or its controller may stall 1.5 s (GC, a starved core on a loaded
    # 2-core machine) without a false failover; 2 s + the controller's 250 ms scan +
    # the election stays under 3 s. RocketMQ ships 1000 / 10000.
    controllerHeartBeatTimeoutMills: PositiveInt = 2000
    brokerHeartbeatInterval: PositiveInt = 500
    slaveTimeout: PositiveInt = 3000
    slaveSyncInterval: PositiveInt = 3000
    haMaxTimeSlaveNotCatchup: PositiveInt = 15000
    haSendHeartbeatInterval: PositiveInt = 5000
    haHousekeepingInterval: PositiveInt = 20000
    haMaxGapNotInSync: PositiveInt = 256 * 1024 * 1024
    storePathEpochFile: str | None = None
    allAckInSyncStateSet: bool = False
    inSyncReplicas: PositiveInt = 1
    minInSyncReplicas: PositiveInt = 1
    asyncLearner: bool = False
    syncFromLastFile: bool = False
    enableSlaveActingMaster: bool = False
    brokerElectionPriority: NonNegativeInt = 2**31 - 1

    # DLedger commitlog
    enableDLegerCommitLog: bool = False
    dLegerGroup: str | None = None
    dLegerPeers: str | None = None
    dLegerSelfId: str | None = None
    preferredLeaderId: str | None = None
    preferredLeaderIds: str | None = None
    """Peers leadership returns to once caught up, ',' or ';' separated."""
    dLegerPreferredLeaderGap: PositiveInt = 1000
    """How close (in entries) a preferred peer must be before leadership moves to it."""
    heartBeatTimeIntervalMs: PositiveInt = 100
    """DLedger's key: ms between the leader's heartbeats."""
    maxHeartBeatLeak: PositiveInt = 15
    """DLedger's key: heartbeats a follower misses before it campaigns (and a leader
    that heard no majority for as long steps down). 100 ms x 15 = 1.5 s of silence: a
    leader may stall 1.4 s (GC, a starved core) without a false election, and a hung or
    cut-off leader is replaced soon after that silence (one vote round later when the
    first vote splits), leaving the client time to move within 3 s. DLedger ships
    2000 x 3."""
    storePathDLedgerCommitLog: str | None = None

    @field_validator("namesrvAddr", "controllerAddr")
    @classmethod
    def _addr_list(cls, value: str | None) -> str | None:
        return _check_addr_list(value)

    @field_validator("dLegerPeers")
    @classmethod
    def _peers(cls, value: str | None) -> str | None:
        parse_dledger_peers(value)
        return value

    @field_validator("initAuthenticationUser", "innerClientAuthenticationCredentials")
    @classmethod
    def _credentials(cls, value: str | None) -> str | None:
        if value:
            credentials_of(value)
        return value

    @field_validator("deleteWhen")
    @classmethod
    def _delete_when(cls, value: str) -> str:
        hours = [h for h in value.split(";") if h]
        if not hours or not all(h.isdigit() and 0 <= int(h) <= 23 for h in hours):
            raise ValueError("expected hours 00..23 separated by ';'")
        return value

    # ---- derived values -------------------------------------------------

    @property
    def namesrv_addrs(self) -> list[str]:
        return split_addr_list(self.namesrvAddr)

    @property
    def controller_addrs(self) -> list[str]:
        return split_addr_list(self.controllerAddr)

    @property
    def dledger_peers(self) -> dict[str, str]:
        return parse_dledger_peers(self.dLegerPeers)

    @property
    def advertised_ip(self) -> str:
        """The address clients and the name server are told (RocketMQ's brokerIP1):
        the host's address unless ``brokerIP1`` is set, whatever ``bindAddress`` is."""
        return self.brokerIP1 or _local_ip()

    @property
    def broker_addr(self) -> str:
        return f"{self.advertised_ip}:{self.listenPort}"

    @property
    def ha_addr(self) -> str:
        return f"{self.brokerIP2 or self.advertised_ip}:{self.haListenPort}"

    @property
    def commitlog_dir(self) -> Path:
        return Path(self.storePathCommitLog or Path(self.storePathRootDir) / "commitlog")

    @property
    def epoch_file(self) -> Path:
        return Path(self.storePathEpochFile or Path(self.storePathRootDir) / "epochFileCheckpoint")

    @property
    def is_master(self) -> bool:
        return self.brokerRole != BrokerRole.SLAVE

    @property
    def metrics_enabled(self) -> bool:
        return self.metricsExporterType == MetricsExporterType.PROM

    def default_frame_max_length(self) -> int:
        """16 MiB, or room for a batch of two messages of maxMessageSize if more."""
        return max(DEFAULT_MAX_FRAME_SIZE, self.maxMessageSize * 2 + FRAME_OVERHEAD)

    # ---- cross-field rules ---------------------------------------------

    def cross_field_problems(self) -> list[tuple[str, str]]:
        """``(key, problem)`` for every rule that spans several keys."""
        problems: list[tuple[str, str]] = []
        if self.enableControllerMode and self.enableDLegerCommitLog:
            problems.append(
                ("enableDLegerCommitLog", "cannot be true together with enableControllerMode=true")
            )
        if self.enableControllerMode and not self.controller_addrs:
            problems.append(("controllerAddr", "required when enableControllerMode=true"))
        if self.enableDLegerCommitLog:
            problems.extend(self._dledger_problems())
        if not self.enableControllerMode and not self.enableDLegerCommitLog:
            if self.brokerRole == BrokerRole.SLAVE and self.brokerId == MASTER_ID:
                problems.append(("brokerId", "must be > 0 when brokerRole=SLAVE"))
            if self.brokerRole != BrokerRole.SLAVE and self.brokerId != MASTER_ID:
                problems.append(("brokerId", f"must be 0 when brokerRole={self.brokerRole}"))
        if self.minInSyncReplicas > self.inSyncReplicas:
            problems.append(
                (
                    "minInSyncReplicas",
                    f"{self.minInSyncReplicas} exceeds inSyncReplicas={self.inSyncReplicas}",
                )
            )
        if self.serverFrameMaxLength is not None \
                and self.serverFrameMaxLength < self.maxMessageSize + FRAME_OVERHEAD:
            problems.append(
                (
                    "serverFrameMaxLength",
                    f"{self.serverFrameMaxLength} cannot carry a message of maxMessageSize="
                    f"{self.maxMessageSize} (needs at least "
                    f"{self.maxMessageSize + FRAME_OVERHEAD})",
                )
            )
        if self.maxMessageSize >= self.mappedFileSizeCommitLog:
            problems.append(
                (
                    "mappedFileSizeCommitLog",
                    f"must be larger than maxMessageSize={self.maxMessageSize}",
                )
            )
        if self.defaultTopicQueueNums > self.maxTopicQueueNums:
            problems.append(
                ("defaultTopicQueueNums", f"exceeds maxTopicQueueNums={self.maxTopicQueueNums}")
            )
        problems.extend(self._port_clashes())
        return problems

    def _dledger_problems(self) -> list[tuple[str, str]]:
        problems: list[tuple[str, str]] = []
        if not self.dLegerGroup:
            problems.append(("dLegerGroup", "required when enableDLegerCommitLog=true"))
        peers = self.dledger_peers
        if not peers:
            problems.append(("dLegerPeers", "required when enableDLegerCommitLog=true"))
        if not self.dLegerSelfId:
            problems.append(("dLegerSelfId", "required when enableDLegerCommitLog=true"))
        elif peers and self.dLegerSelfId not in peers:
            problems.append(("dLegerSelfId", f"{self.dLegerSelfId!r} is not one of dLegerPeers"))
        if self.preferredLeaderId and peers and self.preferredLeaderId not in peers:
            problems.append(
                ("preferredLeaderId", f"{self.preferredLeaderId!r} is not one of dLegerPeers")
            )
        return problems

    def _port_clashes(self) -> list[tuple[str, str]]:
        used: dict[int, str] = {self.listenPort: "listenPort"}
        candidates = [("haListenPort", self.haListenPort)]
        if self.enableProxy:
            candidates.append(("grpcServerPort", self.grpcServerPort))
        if self.metrics_enabled:
            candidates.append(("metricsPromExporterPort", self.metricsPromExporterPort))
        problems: list[tuple[str, str]] = []
        for key, port in candidates:
            if port in used:
                problems.append((key, f"port {port} is already used by {used[port]}"))
            used.setdefault(port, key)
        return problems


def _local_ip() -> str:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            return str(s.getsockname()[0])
    except OSError:
        return "127.0.0.1"


def check_broker_config(cfg: BrokerConfig, source: str = "<config>") -> BrokerConfig:
    """Raise ConfigError naming every key that breaks a cross-field rule."""
    problems = cfg.cross_field_problems()
    if problems:
        parts = [
            f"invalid value for key {key!r} ({getattr(cfg, key)!s}): {msg}" for key, msg in problems
        ]
        raise ConfigError(f"{source}: " + "; ".join(parts))
    return cfg


def load_broker_config(
    path: str | Path | None, overrides: dict[str, str] | None = None
) -> BrokerConfig:
    """Load a broker properties file, apply overrides, validate every rule."""
    cfg = load_config(BrokerConfig, path, overrides)
    return check_broker_config(cfg, str(path or "<command line>"))
