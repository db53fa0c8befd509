"""Custom resource models: the spec and status of ``Controller`` and ``BrokerGroup``.

Field names are camelCase, as Kubernetes users write them. Every cross-field
rule checked here has an equivalent CEL rule in the CRD (``x-kubernetes-validations``
on the model's ``json_schema_extra``), so the API server and the operator agree.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.config import JsonDict

from mqcluster.broker.config import BrokerConfig
from mqcluster.controller.config import ControllerConfig

from .config_keys import (
    BROKER_KEYS,
    BROKER_MANAGED_KEYS,
    CONTROLLER_KEYS,
    CONTROLLER_MANAGED_KEYS,
    bad_keys,
)

PRESERVE: JsonDict = {"x-kubernetes-preserve-unknown-fields": True}
QUANTITY = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$"
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
ROCKETMQ_NAME = r"^[A-Za-z0-9_-]+$"

FreeForm = dict[str, Any]
Mode = Literal["Controller", "DLedger", "MasterSlave"]
PullPolicy = Literal["Always", "IfNotPresent", "Never"]


class CRModel(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


def free_form(description: str) -> Any:
    return Field(default_factory=dict, description=description, json_schema_extra=PRESERVE)


def free_form_list(description: str) -> Any:
    return Field(
        default_factory=list,
        description=description,
        json_schema_extra={"items": {"type": "object", **PRESERVE}},
    )


class Storage(CRModel):
    size: str = Field(default="8Gi", pattern=QUANTITY)
    """Size of the PersistentVolumeClaim of each replica."""
    storageClassName: str | None = None
    """StorageClass of the claims; the cluster default when unset."""


class BrokerStorage(Storage):
    reclaimPolicy: Literal["Retain", "Delete"] = "Retain"
    """What a scale-down does with the PVCs of the removed replicas (controller mode)."""


class Scheduling(CRModel):
    affinity: FreeForm = free_form("Pod affinity (core/v1 Affinity); replaces the default.")
    tolerations: list[FreeForm] = free_form_list("Pod tolerations (core/v1 Toleration).")
    nodeSelector: dict[str, str] = Field(default_factory=dict)
    """Node labels the pods must match."""
    topologySpreadConstraints: list[FreeForm] = free_form_list(
        "Topology spread constraints (core/v1 TopologySpreadConstraint)."
    )
    podAntiAffinity: Literal["Preferred", "Required", "Disabled"] = "Preferred"
    """Default anti-affinity between the replicas, used when ``affinity`` is empty."""
    priorityClassName: str | None = None
    """PriorityClass of the pods."""


RESERVED_POD_LABELS = ("role", "app.kubernetes.io/name", "app.kubernetes.io/instance",
                       "app.kubernetes.io/component")
RESERVED_LABELS_RULE: JsonDict = {
    "rule": " && ".join(f"!('{key}' in self)" for key in RESERVED_POD_LABELS),
    "message": "podLabels cannot set the labels the operator selects pods by",
}


class PodMeta(CRModel):
    podAnnotations: dict[str, str] = Field(default_factory=dict)
    """Extra annotations on every pod."""
    podLabels: dict[str, str] = Field(
        default_factory=dict, json_schema_extra={"x-kubernetes-validations": [RESERVED_LABELS_RULE]}
    )
    """Extra labels on every pod."""

    @field_validator("podLabels")
    @classmethod
    def _no_reserved_labels(cls, value: dict[str, str]) -> dict[str, str]:
        taken = sorted(set(value) & set(RESERVED_POD_LABELS))
        if taken:
            raise ValueError(
                f"podLabels cannot set the labels the operator selects pods by: {taken}"
            )
        return value


class ControllerPorts(CRModel):
    controller: int = Field(default=9878, ge=1, le=65535)
    """Controller port: brokers (controllerAddr), admin tools and the Raft peers
    (controllerDLegerPeers) all use it."""
    namesrv: int = Field(default=9876, ge=1, le=65535)
    """Name server port (listenPort), when the controller is embedded in mqnamesrv."""
    metrics: int = Field(default=5557, ge=1, le=65535)
    """HTTP port with /metrics and /health (metricsPromExporterPort)."""


def fields_elsewhere(given: dict[str, str], section: type[CRModel]) -> list[str]:
    """Keys of a free-form config that the spec has a field of its own for."""
    return [f"key {key!r} is set by failureDetection.{key}, not here"
            for key in sorted(given) if key in section.model_fields]


def _shipped(model: type[BaseModel], key: str) -> int:
    """The process's own default for ``key``: the CRD's default is what ships."""
    default = model.model_fields[key].default
    assert isinstance(default, int)
    return default


class ControllerFailureDetection(CRModel):
    """How soon the controllers act on a broker that stopped heartbeating (a hung or
    cut-off master). Rendered into every controller's file; the defaults replace a
    hung master within 3 s and let a broker stall 1.5 s without a failover."""

    scanNotActiveBrokerInterval: int = Field(
        default=_shipped(ControllerConfig, "scanNotActiveBrokerInterval"), ge=10, le=60000)
    """ms between scans for brokers whose heartbeat timeout has passed."""
    brokerHeartbeatTimeoutMills: int = Field(
        default=_shipped(ControllerConfig, "brokerHeartbeatTimeoutMills"), ge=100, le=600000)
    """ms of silence after which a broker that states no timeout of its own is dead
    (brokers state theirs: BrokerGroup ``failureDetection.controllerHeartBeatTimeoutMills``)."""


PROXY_MANAGED_KEYS = frozenset({
    "bindAddress", "grpcServerPort", "controllerAddr", "namesrvAddr",
    "metricsPromExporterPort", "metricsPromExporterHost", "drainMs"})
"""mqproxy keys the operator renders (ProxySpec fields or the Controller's addresses)."""
PROXY_KEYS = frozenset({
    "brokerName", "brokerClusterName", "masterPollIntervalMs", "namesrvPollIntervalMs",
    "masterWaitMs", "callTimeoutMs", "probeIntervalMs", "probeTimeoutMs", "probeFailures"})
"""mqproxy keys ``proxy.config`` may set (the operator image has no mqcluster.proxy; a
test keeps both sets equal to ProxyConfig's fields)."""


class ProxyAutoscaling(CRModel):
    """A HorizontalPodAutoscaler on the proxies' CPU (rendered only when enabled)."""

    enabled: bool = False
    minReplicas: int | None = Field(default=None, ge=2)
    """Lowest replica count; ``proxy.replicas`` when unset."""
    maxReplicas: int = Field(default=6, ge=2, le=100)
    targetCPUUtilizationPercentage: int = Field(default=70, ge=10, le=100)


class ProxyServiceSpec(CRModel):
    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"
    """Type of the proxy's client Service: the endpoint clients are given."""
    port: int = Field(default=8081, ge=1, le=65535)
    nodePort: int | None = Field(default=None, ge=30000, le=32767)
    annotations: dict[str, str] = Field(default_factory=dict)


class ProxySpec(CRModel):
    """The proxy tier in front of every broker group of this Controller's cluster:
    stateless ``mqproxy`` replicas (a Deployment) behind one client Service."""

    enabled: bool = False
    """Render the proxy tier (Deployment, client Service, PDB, HPA when asked)."""
    replicas: int = Field(default=2, ge=2, le=100)
    """Proxy replicas; at least 2, so a rolling update or a lost node keeps one serving."""
    image: str | None = None
    """Image with mqproxy; the Controller's image when unset."""
    resources: FreeForm = free_form("Container resources (core/v1 ResourceRequirements).")
    autoscaling: ProxyAutoscaling = Field(default_factory=ProxyAutoscaling)
    service: ProxyServiceSpec = Field(default_factory=ProxyServiceSpec)
    metricsPort: int = Field(default=5558, ge=1, le=65535)
    """HTTP port with /metrics and /health (readiness)."""
    drainSeconds: int = Field(default=5, ge=0, le=300)
    """On a rolling update: how long a stopping proxy keeps answering calls in flight
    after it left the Service (preStop, then SIGTERM's drain)."""
    config: dict[str, str] = Field(default_factory=dict)
    """Extra proxy.conf keys (callTimeoutMs, probeIntervalMs, ...)."""

    @field_validator("config")
    @classmethod
    def _proxy_keys(cls, value: dict[str, str]) -> dict[str, str]:
        problems = [f"key {k!r} is set by the operator" for k in sorted(value)
                    if k in PROXY_MANAGED_KEYS]
        problems += [f"unknown proxy key {k!r} (known: {', '.join(sorted(PROXY_KEYS))})"
                     for k in sorted(value) if k not in PROXY_KEYS | PROXY_MANAGED_KEYS]
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @model_validator(mode="after")
    def _scaling(self) -> ProxySpec:
        a = self.autoscaling
        if a.enabled and (a.minReplicas or self.replicas) > a.maxReplicas:
            raise ValueError("proxy.autoscaling.maxReplicas is below its minReplicas "
                             "(or proxy.replicas)")
        return self


class ControllerSpec(PodMeta):
    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    # has(): the API server also evaluates rules on the spec's default ({}).
                    "rule": "has(self.deployment) == has(oldSelf.deployment)"
                    " && (!has(self.deployment) || self.deployment == oldSelf.deployment)",
                    "message": "deployment cannot be changed",
                }
            ]
        }
    )

    replicas: int = Field(default=3, ge=1, le=9)
    """Controller replicas; 3 tolerate one failure (Raft majority)."""
    image: str = "mqcluster/broker:0.1.0"
    """Image that holds mqcontroller and mqnamesrv."""
    imagePullPolicy: PullPolicy = "IfNotPresent"
    deployment: Literal["Standalone", "EmbeddedInNamesrv"] = "Standalone"
    """Run mqcontroller, or mqnamesrv with enableControllerInNamesrv=true."""
    resources: FreeForm = free_form("Container resources (core/v1 ResourceRequirements).")
    storage: Storage = Field(default_factory=Storage)
    """Volume of the controller's Raft log (controllerStorePath)."""
    config: dict[str, str] = Field(default_factory=dict)
    """Extra controller.conf keys, RocketMQ names."""
    ports: ControllerPorts = Field(default_factory=ControllerPorts)
    scheduling: Scheduling = Field(default_factory=Scheduling)
    failureDetection: ControllerFailureDetection = Field(
        default_factory=ControllerFailureDetection)
    """Broker failure detection, rendered explicitly (``config`` may not repeat these keys)."""
    proxy: ProxySpec = Field(default_factory=ProxySpec)
    """The proxy tier: one client endpoint for every group of this cluster."""

    @field_validator("config")
    @classmethod
    def _known_keys(cls, value: dict[str, str]) -> dict[str, str]:
        problems = fields_elsewhere(value, ControllerFailureDetection)
        rest = {k: v for k, v in value.items() if k not in ControllerFailureDetection.model_fields}
        problems += bad_keys(rest, CONTROLLER_KEYS, CONTROLLER_MANAGED_KEYS)
        if problems:
            raise ValueError("; ".join(problems))
        return value

    def embedded(self) -> bool:
        return self.deployment == "EmbeddedInNamesrv"


class ControllerRef(CRModel):
    name: str = Field(pattern=DNS_LABEL, max_length=63)
    """Name of the Controller resource."""
    namespace: str | None = None
    """Namespace of the Controller; the BrokerGroup's own when unset."""


class BrokerPorts(CRModel):
    listen: int = Field(default=10911, ge=1, le=65535)
    """Remoting port (listenPort)."""
    ha: int = Field(default=10912, ge=1, le=65535)
    """HA replication port (haListenPort)."""
    grpc: int = Field(default=8081, ge=1, le=65535)
    """gRPC client endpoint (apache.rocketmq.v2.MessagingService)."""
    metrics: int = Field(default=5557, ge=1, le=65535)
    """HTTP port with /metrics and /health (metricsPromExporterPort)."""
    dledger: int = Field(default=40911, ge=1, le=65535)
    """DLedger peer port (DLedger mode)."""


class ServiceSpec(CRModel):
    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"
    """Type of the client Service that selects the master."""
    grpcPort: int = Field(default=8081, ge=1, le=65535)
    """Service port of the gRPC client endpoint."""
    remotingPort: int = Field(default=10911, ge=1, le=65535)
    """Service port of the remoting endpoint."""
    grpcNodePort: int | None = Field(default=None, ge=30000, le=32767)
    """Fixed nodePort for gRPC (NodePort/LoadBalancer only)."""
    remotingNodePort: int | None = Field(default=None, ge=30000, le=32767)
    """Fixed nodePort for remoting (NodePort/LoadBalancer only)."""
    annotations: dict[str, str] = Field(default_factory=dict)
    """Annotations of the client Service (e.g. for a cloud load balancer)."""


HEARTBEAT_RULE: JsonDict = {
    "rule": "!has(self.brokerHeartbeatInterval) || !has(self.controllerHeartBeatTimeoutMills)"
    " || self.controllerHeartBeatTimeoutMills >= 2 * self.brokerHeartbeatInterval",
    "message": "controllerHeartBeatTimeoutMills must be at least 2 x brokerHeartbeatInterval"
    " (one late heartbeat would otherwise be a failover)",
}


class BrokerFailureDetection(CRModel):
    """How soon a hung or cut-off master is replaced. Rendered into every broker's file;
    the defaults (RocketMQ's and DLedger's key names) replace it within 3 s and let a
    master stall 1.5 s (controller mode) or 1.4 s (DLedger) without a failover."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [HEARTBEAT_RULE]})

    brokerHeartbeatInterval: int = Field(
        default=_shipped(BrokerConfig, "brokerHeartbeatInterval"), ge=50, le=60000)
    """Controller mode: ms between a broker's heartbeats to the controllers."""
    controllerHeartBeatTimeoutMills: int = Field(
        default=_shipped(BrokerConfig, "controllerHeartBeatTimeoutMills"), ge=100, le=600000)
    """Controller mode: ms without a heartbeat after which the controllers hold the
    broker dead and elect another master (the broker states it in every heartbeat)."""
    heartBeatTimeIntervalMs: int = Field(
        default=_shipped(BrokerConfig, "heartBeatTimeIntervalMs"), ge=10, le=60000)
    """DLedger mode: ms between the Raft leader's heartbeats."""
    maxHeartBeatLeak: int = Field(
        default=_shipped(BrokerConfig, "maxHeartBeatLeak"), ge=2, le=1000)
    """DLedger mode: heartbeats a follower misses before it campaigns."""

    @model_validator(mode="after")
    def _timeout_covers_beats(self) -> BrokerFailureDetection:
        if self.controllerHeartBeatTimeoutMills < 2 * self.brokerHeartbeatInterval:
            raise ValueError(str(HEARTBEAT_RULE["message"]) + f": got "
                             f"{self.controllerHeartBeatTimeoutMills} and "
                             f"{self.brokerHeartbeatInterval}")
        return self


class UpgradePolicy(CRModel):
    strategy: Literal["SlavesFirstSwitchover", "Manual"] = "SlavesFirstSwitchover"
    """Slaves one at a time, then a switchover, then the old master; or leave pods alone."""
    maxLagBytes: int = Field(default=0, ge=0)
    """A restarted slave counts as caught up when its commitlog max offset is at most
    this many bytes behind the master's."""
    catchUpTimeoutSeconds: int = Field(default=600, ge=10)
    """How long a restarted slave may take to be Ready, rejoin the SyncStateSet and catch
    up; after that the upgrade pauses (reason PausedStepTimeout)."""
    switchoverTimeoutSeconds: int = Field(default=120, ge=5)
    """How long a switchover (DLedger: leadership transfer) to an upgraded in-sync slave
    may take before the upgrade pauses."""


class UpgradeSpec(CRModel):
    paused: bool = False
    """Hold a rolling upgrade where it is (reason PausedByUser); false lets it go on."""


class MigrationSpec(CRModel):
    drainPolicy: Literal["WaitForConsumers", "RetentionWindow"] = "WaitForConsumers"
    """Before the stores are cleared: wait for consumer lag 0, or for the retention window."""
    retentionWindowSeconds: int = Field(default=259200, ge=0)
    """With RetentionWindow: how long to wait after writes are off."""
    drainTimeoutSeconds: int = Field(default=3600, ge=0)
    """With WaitForConsumers: give up (phase Failed) after this long."""
    keepFiles: list[str] = Field(
        default_factory=lambda: ["config/topics.json", "config/subscriptionGroup.json"]
    )
    """Store files kept when the store is cleared."""


class BrokerGroupSpec(PodMeta):
    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.mode) || self.mode != 'Controller'"
                    " || has(self.controllerRef)",
                    "message": "controllerRef is required when mode is Controller",
                    "fieldPath": ".controllerRef",
                },
                {
                    "rule": "!has(self.mode) || self.mode != 'DLedger' || !has(self.replicas)"
                    " || self.replicas >= 3",
                    "message": "DLedger mode needs at least 3 replicas",
                    "fieldPath": ".replicas",
                },
                {
                    "rule": "!has(self.minInSyncReplicas) || !has(self.inSyncReplicas)"
                    " || !has(self.replicas) || (self.minInSyncReplicas <= self.inSyncReplicas"
                    " && self.inSyncReplicas <= self.replicas)",
                    "message": "need minInSyncReplicas <= inSyncReplicas <= replicas",
                },
                {
                    "rule": "!has(self.asyncLearnerReplicas) || !has(self.replicas)"
                    " || self.asyncLearnerReplicas < self.replicas",
                    "message": "asyncLearnerReplicas must leave at least one voting replica",
                    "fieldPath": ".asyncLearnerReplicas",
                },
                {
                    "rule": "has(self.brokerName) == has(oldSelf.brokerName)"
                    " && (!has(self.brokerName) || self.brokerName == oldSelf.brokerName)",
                    "message": "brokerName is immutable",
                    "fieldPath": ".brokerName",
                },
                {
                    "rule": "!has(self.mode) || !has(oldSelf.mode) || self.mode == oldSelf.mode"
                    " || (oldSelf.mode == 'DLedger' && self.mode == 'Controller')",
                    "message": "mode can only change from DLedger to Controller (migration)",
                    "fieldPath": ".mode",
                },
            ]
        }
    )

    brokerName: str | None = Field(default=None, pattern=ROCKETMQ_NAME, max_length=63)
    """RocketMQ brokerName of the group; the resource name when unset. Immutable."""
    clusterName: str = Field(default="DefaultCluster", pattern=ROCKETMQ_NAME)
    """brokerClusterName."""
    mode: Mode = "Controller"
    """HA mode: Controller (RIP-44 auto switch), DLedger (Raft commitlog), MasterSlave."""
    replicas: int = Field(default=2, ge=1, le=9)
    """Broker replicas in the group."""
    controllerRef: ControllerRef | None = None
    """The Controller that elects masters (required in Controller mode)."""
    namesrvAddr: str | None = None
    """namesrvAddr; derived from controllerRef when the controller is embedded in namesrv."""
    image: str = "mqcluster/broker"
    """Broker image repository."""
    version: str = Field(default="0.1.0", pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
    """Image tag; changing it starts a rolling upgrade."""
    imagePullPolicy: PullPolicy = "IfNotPresent"
    resources: FreeForm = free_form("Container resources (core/v1 ResourceRequirements).")
    storage: BrokerStorage = Field(default_factory=BrokerStorage)
    """Volume of the broker store (storePathRootDir)."""
    brokerConfig: dict[str, str] = Field(default_factory=dict)
    """Extra broker.conf keys, RocketMQ names, checked against a known-key list."""
    allAckInSyncStateSet: bool = False
    """Acknowledge a write only when every SyncStateSet member has it."""
    inSyncReplicas: int = Field(default=1, ge=1)
    """Replicas that must have a message before it is acknowledged."""
    minInSyncReplicas: int = Field(default=1, ge=1)
    """Writes fail when the SyncStateSet is smaller than this."""
    asyncLearnerReplicas: int = Field(default=0, ge=0)
    """The last N replicas run as asyncLearner: replicate but never join the SyncStateSet."""
    ports: BrokerPorts = Field(default_factory=BrokerPorts)
    service: ServiceSpec = Field(default_factory=ServiceSpec)
    scheduling: Scheduling = Field(default_factory=Scheduling)
    upgradePolicy: UpgradePolicy = Field(default_factory=UpgradePolicy)
    """How a rolling upgrade proceeds (strategy, catch-up gap, step timeouts)."""
    upgrade: UpgradeSpec = Field(default_factory=UpgradeSpec)
    """Control of the rolling upgrade under way (``paused``)."""
    migration: MigrationSpec = Field(default_factory=MigrationSpec)
    failureDetection: BrokerFailureDetection = Field(default_factory=BrokerFailureDetection)
    """Heartbeats and timeouts of the mode's master election, rendered explicitly
    (``brokerConfig`` may not repeat these keys)."""

    @field_validator("brokerConfig")
    @classmethod
    def _known_keys(cls, value: dict[str, str]) -> dict[str, str]:
        problems = fields_elsewhere(value, BrokerFailureDetection)
        rest = {k: v for k, v in value.items() if k not in BrokerFailureDetection.model_fields}
        problems += bad_keys(rest, BROKER_KEYS, BROKER_MANAGED_KEYS)
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @model_validator(mode="after")
    def _cross_field(self) -> BrokerGroupSpec:
        if self.mode == "Controller" and self.controllerRef is None:
            raise ValueError("controllerRef is required when mode is Controller")
        if self.mode == "DLedger" and self.replicas < 3:
            raise ValueError("DLedger mode needs at least 3 replicas")
        if not self.minInSyncReplicas <= self.inSyncReplicas <= self.replicas:
            raise ValueError("need minInSyncReplicas <= inSyncReplicas <= replicas")
        if self.asyncLearnerReplicas >= self.replicas:
            raise ValueError("asyncLearnerReplicas must leave at least one voting replica")
        return self

    def broker_name(self, resource_name: str) -> str:
        return self.brokerName or resource_name

    def image_ref(self) -> str:
        return f"{self.image}:{self.version}"


def mode_change_allowed(old: str, new: str) -> bool:
    return old == new or (old == "DLedger" and new == "Controller")


def check_transition(old: BrokerGroupSpec, new: BrokerGroupSpec) -> list[str]:
    """The CEL transition rules (``oldSelf``) as a function, for the operator's own check."""
    problems: list[str] = []
    if not mode_change_allowed(old.mode, new.mode):
        problems.append("mode can only change from DLedger to Controller (migration)")
    if old.brokerName != new.brokerName:
        problems.append("brokerName is immutable")
    return problems


# One entry per type; each writer owns its entries (server-side apply).
CONDITIONS_LIST_MAP: JsonDict = {"x-kubernetes-list-type": "map",
                                 "x-kubernetes-list-map-keys": ["type"]}


class Condition(CRModel):
    type: str
    """Ready, MasterElected, Progressing, Upgrading, Migrating, Degraded."""
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    """CamelCase reason."""
    message: str = ""
    lastTransitionTime: str | None = None
    """RFC 3339 time of the last status change."""
    observedGeneration: int | None = None


class EpochEntry(CRModel):
    epoch: int
    startOffset: int
    endOffset: int | None = None
    """Unset for the current epoch."""


class ReplicaStatus(CRModel):
    pod: str
    brokerId: int | None = None
    address: str | None = None
    role: Literal["master", "slave", "unknown"] = "unknown"
    maxOffset: int | None = None
    inSync: bool = False
    alive: bool = True
    epochs: list[EpochEntry] = Field(default_factory=list)


class MigrationStatus(CRModel):
    step: str = ""
    """Draining, Stopping, Restarting, then Done; or Failed / Aborted."""
    id: str | None = None
    """Names this migration; the pods clear their stores once per id."""
    startedAt: float | None = None
    """Unix time the writes were turned off."""
    since: float | None = None
    """Unix time the current step began (for the drain timeout and window)."""
    progress: str = ""


class ScalingStatus(CRModel):
    step: str = ""
    """SwitchingOver, Removing, Done, Refused; CatchingUp while replicas are outside
    the SyncStateSet."""
    to: int | None = None
    fromReplicas: int | None = None
    removed: list[str] = Field(default_factory=list)
    retire: list[int] = Field(default_factory=list)
    """brokerIds of the removed replicas, cleaned from the controller once they stop."""
    addresses: list[str] = Field(default_factory=list)
    """Their addresses (one per brokerId of ``retire``), unregistered from the name
    servers."""
    switchoverTo: str | None = None
    progress: str | None = None


class RestartStatus(CRModel):
    requested: str | None = None
    """Value of the mqcluster.io/restart annotation being carried out."""
    pending: list[str] = Field(default_factory=list)
    """Pods still to restart, slaves first, the master last."""
    deleted: dict[str, str] = Field(default_factory=dict)
    """Pod deleted last and its uid (the next waits until it is back and Ready)."""
    completed: str | None = None
    """Value of the last restart that finished."""


class UpgradeStatus(CRModel):
    revision: str | None = None
    """StatefulSet updateRevision being rolled out."""
    since: float | None = None
    """Unix time of the last step (for the catch-up and switchover timeouts)."""
    deleted: dict[str, str] = Field(default_factory=dict)
    """Pod restarted last and its old uid."""
    switchoverTo: str | None = None
    """Pod the master was asked to hand over to (controller mode)."""
    transferTo: str | None = None
    """Pod the DLedger leader was asked to transfer leadership to."""
    askedAt: float | None = None
    """Unix time the handover (switchoverTo / transferTo) was last asked for."""
    progress: str = ""
    """``2/3 pods upgraded``."""
    paused: str | None = None
    """PausedStepTimeout when a step did not converge in time (Warning Event posted)."""


class BrokerGroupStatus(CRModel):
    model_config = ConfigDict(json_schema_extra=PRESERVE)

    phase: Literal[
        "Pending", "Running", "Degraded", "Upgrading", "Migrating", "Failed", "Paused"
    ] = "Pending"
    observedGeneration: int | None = None
    readyReplicas: int = 0
    masterPod: str | None = None
    masterAddress: str | None = None
    masterEpoch: int | None = None
    syncStateSet: list[str] = Field(default_factory=list)
    syncStateSetEpoch: int | None = None
    activeController: str | None = None
    replicas: list[ReplicaStatus] = Field(default_factory=list)
    conditions: list[Condition] = Field(default_factory=list, json_schema_extra=CONDITIONS_LIST_MAP)
    appliedMode: Mode | None = None
    """Mode the objects were last built for."""
    appliedBrokerName: str | None = None
    """brokerName the objects were last built for."""
    migration: MigrationStatus | None = None
    restart: RestartStatus | None = None
    upgrade: UpgradeStatus | None = None
    appliedRuntimeConfig: dict[str, str] | None = None
    """Broker keys taken without a restart, as last pushed to the running brokers."""
    appliedReplicas: int | None = None
    """Replicas the objects were last built for (a scale-down waits for its plan)."""
    scaling: ScalingStatus | None = None
    epochConflicts: list[str] = Field(default_factory=list)
    """Pods whose epoch history shares no epoch with the master's (reason EpochConflict)."""


class ControllerStatus(CRModel):
    model_config = ConfigDict(json_schema_extra=PRESERVE)

    phase: Literal["Pending", "Running", "Degraded", "Failed", "Paused"] = "Pending"
    observedGeneration: int | None = None
    readyReplicas: int = 0
    activeController: str | None = None
    raftTerm: int | None = None
    members: list[str] = Field(default_factory=list)
    conditions: list[Condition] = Field(default_factory=list, json_schema_extra=CONDITIONS_LIST_MAP)
    proxyEndpoint: str | None = None
    """Where clients connect (the proxy tier's client Service, ``host:port``): every
    group of this cluster through one endpoint. Unset while the proxy is not enabled."""
