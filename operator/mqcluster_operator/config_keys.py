"""RocketMQ configuration keys a user may override through a custom resource.

Keys that the operator derives from the spec (identity, addresses, HA mode)
are listed separately: overriding them would break the group, so they are
rejected with the key named.
"""

from __future__ import annotations

from mqcluster.common import rocketmq_keys
from mqcluster.common.config import closest_key

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
    """Human-readable problems with ``given`` keys, empty when all are fine.

    A key nobody knows is most likely a typo: the message suggests the closest key,
    as the broker and controller processes do for their files."""
    problems: list[str] = []
    for key in sorted(given):
        if key in managed:
            problems.append(f"key {key!r} is set by the operator and cannot be overridden")
        elif key in allowed:
            continue
        elif key in rocketmq_keys.ALL:
            problems.append(f"RocketMQ key {key!r} cannot be overridden here")
        else:
            problems.append(unknown_key(key, allowed, managed))
    return problems


def unknown_key(key: str, allowed: frozenset[str], managed: frozenset[str]) -> str:
    """``unknown key 'x': did you mean 'y'?``, saying when ``y`` comes from the spec."""
    guess = closest_key(key, allowed | managed)
    if guess is None:
        return f"unknown key {key!r}"
    where = " (the operator sets it from the spec)" if guess in managed else ""
    return f"unknown key {key!r}: did you mean {guess!r}?{where}"
