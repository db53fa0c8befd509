"""RocketMQ configuration keys a user may override through a custom resource.

Keys that the operator derives from the spec (identity, addresses, HA mode)
are listed separately: overriding them would break the group, so they are
rejected with the key named.
"""

from __future__ import annotations

BROKER_KEYS: frozenset[str] = frozenset(
    {
        "autoCreateSubscriptionGroup",
        "autoCreateTopicEnable",
        "brokerPermission",
        "cleanFileForciblyEnable",
        "commitIntervalCommitLog",
        "defaultTopicQueueNums",
        "deleteWhen",
        "diskMaxUsedSpaceRatio",
        "enableElectUncleanMaster",
        "enablePropertyFilter",
        "fileReservedTime",
        "flushDiskType",
        "flushIntervalCommitLog",
        "haMaxTimeSlaveNotCatchup",
        "haSendHeartbeatInterval",
        "haHousekeepingInterval",
        "haTransferBatchSize",
        "mapedFileSizeCommitLog",
        "mappedFileSizeCommitLog",
        "mappedFileSizeConsumeQueue",
        "maxMessageSize",
        "messageDelayLevel",
        "notifyBrokerRoleChanged",
        "sendMessageThreadPoolNums",
        "pullMessageThreadPoolNums",
        "slaveReadEnable",
        "syncBrokerMetadataPeriod",
        "syncControllerMetadataPeriod",
        "syncFromLastFile",
        "transientStorePoolEnable",
        "traceTopicEnable",
        "useReentrantLockWhenPutMessage",
        "waitTimeMillsInSendQueue",
        "enableSlaveActingMaster",
        "totalReplicas",
        "controllerHeartBeatTimeoutMills",
        "brokerHeartbeatInterval",
        "enableRetryTopicV2",
        "timerWheelEnable",
        "longPollingEnable",
        "messageStorePlugIn",
    }
)

BROKER_MANAGED_KEYS: frozenset[str] = frozenset(
    {
        "brokerClusterName",
        "brokerName",
        "brokerId",
        "brokerRole",
        "brokerIP1",
        "brokerIP2",
        "namesrvAddr",
        "listenPort",
        "haListenPort",
        "grpcServerPort",
        "grpcRouteAccessPoint",
        "metricsPromExporterPort",
        "storePathRootDir",
        "storePathCommitLog",
        "storePathEpochFile",
        "enableControllerMode",
        "controllerAddr",
        "allAckInSyncStateSet",
        "inSyncReplicas",
        "minInSyncReplicas",
        "asyncLearner",
        "enableDLegerCommitLog",
        "dLegerGroup",
        "dLegerPeers",
        "dLegerSelfId",
    }
)

BROKER_RUNTIME_KEYS: frozenset[str] = frozenset(
    {
        # the broker's updateBrokerConfig applies these at once (its RUNTIME_KEYS)
        "brokerPermission",
        "autoCreateTopicEnable",
        "autoCreateSubscriptionGroup",
        "defaultTopicQueueNums",
        "haMaxTimeSlaveNotCatchup",
        "allAckInSyncStateSet",
        "inSyncReplicas",
        "minInSyncReplicas",
    }
)
"""Broker keys changed without a restart: they stay out of the pod template's config
hash and the operator pushes them to the running brokers."""

CONTROLLER_KEYS: frozenset[str] = frozenset(
    {
        "enableElectUncleanMaster",
        "notifyBrokerRoleChanged",
        "scanNotActiveBrokerInterval",
        "scanInactiveMasterInterval",
        "controllerThreadPoolNums",
        "controllerRequestThreadPoolQueueCapacity",
        "mappedFileSize",
        "controllerType",
        "isProcessReadEvent",
        "electMasterMaxRetryCount",
        "deleteTopicWithBrokerRegistration",
    }
)

CONTROLLER_MANAGED_KEYS: frozenset[str] = frozenset(
    {
        "listenPort",
        "enableControllerInNamesrv",
        "controllerDLegerGroup",
        "controllerDLegerPeers",
        "controllerDLegerSelfId",
        "controllerStorePath",
        "metricsPromExporterPort",
    }
)


def bad_keys(given: dict[str, str], allowed: frozenset[str], managed: frozenset[str]) -> list[str]:
    """Human-readable problems with ``given`` keys, empty when all are fine."""
    problems: list[str] = []
    for key in sorted(given):
        if key in managed:
            problems.append(f"key {key!r} is set by the operator and cannot be overridden")
        elif key not in allowed:
            problems.append(f"unknown RocketMQ key {key!r}")
    return problems
