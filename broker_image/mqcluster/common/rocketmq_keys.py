"""Configuration keys of Apache RocketMQ 5.3, by the Java class that reads them.

Data only. A key in a properties file that one of our models does not read,
but that RocketMQ knows, is a setting for a feature this implementation does
not have (thread pools, POP, RocksDB...): the process warns and goes on, as
RocketMQ itself ignores keys it has no field for. A key that is neither ours
nor listed here is a typo or a stale name, and stops the process.

The lists are not exhaustive: they cover the fields of BrokerConfig (with
BrokerIdentity), MessageStoreConfig, NettyServerConfig, NettyClientConfig,
NamesrvConfig, ControllerConfig (with JraftConfig), ProxyConfig and AuthConfig
that deployments commonly set, plus the old spellings RocketMQ 4 used
(``mapedFileSizeCommitLog``).
"""

from __future__ import annotations

from collections.abc import Mapping

METRICS_EXPORTER: frozenset[str] = frozenset({
    # read by BrokerConfig, ControllerConfig and ProxyConfig alike
    "metricsExporterType", "metricsGrpcExporterTarget", "metricsGrpcExporterHeader",
    "metricGrpcExporterTimeOutInMills", "metricGrpcExporterIntervalInMills",
    "metricLoggingExporterIntervalInMills", "metricsPromExporterPort",
    "metricsPromExporterHost", "metricsLabel", "metricsInDelta",
})

BROKER_IDENTITY: frozenset[str] = frozenset({
    "brokerName", "brokerClusterName", "brokerId", "isBrokerContainer", "isInBrokerContainer",
})

BROKER_CONFIG: frozenset[str] = frozenset({
    "brokerConfigPath", "rocketmqHome", "namesrvAddr", "listenPort", "brokerIP1", "brokerIP2",
    "recoverConcurrently", "brokerPermission", "defaultTopicQueueNums", "autoCreateTopicEnable",
    "clusterTopicEnable", "brokerTopicEnable", "autoCreateSubscriptionGroup",
    "messageStorePlugIn", "msgTraceTopicName", "traceTopicEnable",
    "sendMessageThreadPoolNums", "putMessageFutureThreadPoolNums", "pullMessageThreadPoolNums",
    "litePullMessageThreadPoolNums", "ackMessageThreadPoolNums",
    "processReplyMessageThreadPoolNums", "queryMessageThreadPoolNums",
    "adminBrokerThreadPoolNums", "clientManageThreadPoolNums", "consumerManageThreadPoolNums",
    "loadBalanceProcessorThreadPoolNums", "heartbeatThreadPoolNums", "recoverThreadPoolNums",
    "endTransactionThreadPoolNums", "flushConsumerOffsetInterval",
    "flushConsumerOffsetHistoryInterval", "rejectTransactionMessage",
    "fetchNameSrvAddrByDnsLookup", "fetchNamesrvAddrByAddressServer",
    "sendThreadPoolQueueCapacity", "putThreadPoolQueueCapacity", "pullThreadPoolQueueCapacity",
    "litePullThreadPoolQueueCapacity", "ackThreadPoolQueueCapacity",
    "replyThreadPoolQueueCapacity", "queryThreadPoolQueueCapacity",
    "clientManagerThreadPoolQueueCapacity", "consumerManagerThreadPoolQueueCapacity",
    "heartbeatThreadPoolQueueCapacity", "endTransactionPoolQueueCapacity",
    "adminBrokerThreadPoolQueueCapacity", "loadBalanceThreadPoolQueueCapacity",
    "longPollingEnable", "shortPollingTimeMills", "notifyConsumerIdsChangedEnable",
    "highSpeedMode", "commercialBaseCount", "commercialSizePerMsg", "accountStatsEnable",
    "accountStatsPrintZeroValues", "transferMsgByHeap", "regionId",
    "registerBrokerTimeoutMills", "sendHeartbeatTimeoutMillis", "slaveReadEnable",
    "disableConsumeIfConsumerReadSlowly", "consumerFallbehindThreshold",
    "brokerFastFailureEnable", "waitTimeMillsInSendQueue", "waitTimeMillsInPullQueue",
    "waitTimeMillsInLitePullQueue", "waitTimeMillsInHeartbeatQueue",
    "waitTimeMillsInTransactionQueue", "waitTimeMillsInAckQueue",
    "waitTimeMillsInAdminBrokerQueue", "startAcceptSendRequestTimeStamp", "traceOn",
    "enableCalcFilterBitMap", "rejectPullConsumerEnable", "expectConsumerNumUseFilter",
    "maxErrorRateOfBloomFilter", "filterDataCleanTimeSpan", "filterSupportRetry",
    "enablePropertyFilter", "compressedRegister", "forceRegister", "registerNameServerPeriod",
    "updateNameServerAddrPeriod", "brokerHeartbeatInterval", "brokerNotActiveTimeoutMillis",
    "enableNetWorkFlowControl", "enableBroadcastOffsetStore", "broadcastOffsetExpireSecond",
    "broadcastOffsetExpireMaxSecond", "popPollingSize", "popPollingMapSize",
    "maxPopPollingSize", "reviveQueueNum", "reviveInterval", "reviveMaxSlow", "reviveScanTime",
    "enableSkipLongAwaitingAck", "reviveAckWaitMs", "enablePopLog", "enablePopBufferMerge",
    "popCkStayBufferTime", "popCkStayBufferTimeOut", "popCkMaxBufferSize",
    "popCkOffsetMaxQueueSize", "enablePopBatchAck", "enableNotifyAfterPopOrderLockRelease",
    "initPopOffsetByCheckMsgInMem", "retrieveMessageFromPopRetryTopicV1", "enableRetryTopicV2",
    "popFromRetryProbability", "popConsumerFSServiceInit", "popConsumerKVServiceLog",
    "popConsumerKVServiceInit", "popConsumerKVServiceEnable", "popReviveMaxReturnSizePerRead",
    "popReviveConcurrency", "popReviveMaxAttemptTimes", "useSeparateRetryQueue",
    "realTimeNotifyConsumerChange", "litePullMessageEnable", "syncBrokerMemberGroupPeriod",
    "loadBalancePollNameServerInterval", "cleanOfflineBrokerInterval",
    "serverLoadBalancerEnable", "defaultMessageRequestMode", "defaultPopShareQueueNum",
    "transactionTimeOut", "transactionCheckMax", "transactionCheckInterval",
    "transactionMetricFlushInterval", "transactionOpMsgMaxSize", "transactionOpBatchInterval",
    "aclEnable", "storeReplyMessageEnable", "enableDetailStat", "autoDeleteUnusedStats",
    "isolateLogEnable", "forwardTimeout", "enableSlaveActingMaster", "enableRemoteEscape",
    "skipPreOnline", "asyncSendEnable", "useServerSideResetOffset",
    "consumerOffsetUpdateVersionStep", "delayOffsetUpdateVersionStep", "lockInStrictMode",
    "compatibleWithOldNameSrv", "enableControllerMode", "controllerAddr",
    "fetchControllerAddrByDnsLookup", "syncBrokerMetadataPeriod", "checkSyncStateSetPeriod",
    "syncControllerMetadataPeriod", "controllerHeartBeatTimeoutMills",
    "validateSystemTopicWhenUpdateTopic", "brokerElectionPriority", "useStaticSubscription",
    "metricsOtelCardinalityLimit", "channelExpiredTimeout", "subscriptionExpiredTimeout",
    "estimateAccumulation",
    "coldCtrStrategyEnable", "usePIDColdCtrStrategy", "cgColdReadThreshold",
    "globalColdReadThreshold", "fetchNamesrvAddrInterval", "popResponseReturnActualRetryTopic",
    "enableSingleTopicRegister", "enableMixedMessageType", "enableSplitRegistration",
    "popInflightMessageThreshold", "enablePopMessageThreshold", "splitRegistrationSize",
    "configBlackList", "skipWhenCKRePutReachMaxTimes", "appendAckAsync", "appendCkAsync",
    "clearRetryTopicWhenDeleteTopic", "enableLmqStats", "enableCreateSysGroup",
}) | METRICS_EXPORTER

MESSAGE_STORE_CONFIG: frozenset[str] = frozenset({
    "storePathRootDir", "storePathCommitLog", "storePathDLedgerCommitLog", "storePathEpochFile",
    "storePathBrokerIdentity", "readOnlyCommitLogStorePaths", "mappedFileSizeCommitLog",
    "compactionMappedFileSize", "compactionCqMappedFileSize", "compactionScheduleInternal",
    "maxOffsetMapSize", "compactionThreadNum", "enableCompaction", "mappedFileSizeTimerLog",
    "timerPrecisionMs", "timerRollWindowSlot", "timerFlushIntervalMs",
    "timerGetMessageThreadNum", "timerPutMessageThreadNum", "timerEnableDisruptor",
    "timerEnableCheckMetrics", "timerInterceptDelayLevel", "timerMaxDelaySec",
    "timerWheelEnable", "disappearTimeAfterStart", "timerStopEnqueue", "timerCheckMetricsWhen",
    "timerSkipUnknownError", "timerWarmEnable", "timerStopDequeue",
    "timerEnableRetryUntilSuccess", "timerCongestNumEachSlot", "timerMetricSmallThreshold",
    "timerProgressLogIntervalMs", "storeType", "mappedFileSizeConsumeQueue",
    "enableConsumeQueueExt", "mappedFileSizeConsumeQueueExt", "mapperFileSizeBatchConsumeQueue",
    "bitMapLengthConsumeQueueExt", "flushIntervalCommitLog", "commitIntervalCommitLog",
    "maxRecoveryCommitlogFiles", "diskSpaceWarningLevelRatio", "diskSpaceCleanForciblyRatio",
    "useReentrantLockWhenPutMessage", "flushCommitLogTimed", "flushIntervalConsumeQueue",
    "cleanResourceInterval", "deleteCommitLogFilesInterval", "deleteConsumeQueueFilesInterval",
    "destroyMapedFileIntervalForcibly", "redeleteHangedFileInterval", "deleteWhen",
    "diskMaxUsedSpaceRatio", "fileReservedTime", "deleteFileBatchMax", "putMsgIndexHightWater",
    "maxMessageSize", "maxFilterMessageSize", "checkCRCOnRecover", "flushCommitLogLeastPages",
    "commitCommitLogLeastPages", "flushLeastPagesWhenWarmMapedFile",
    "flushConsumeQueueLeastPages", "flushCommitLogThoroughInterval",
    "commitCommitLogThoroughInterval", "flushConsumeQueueThoroughInterval",
    "maxTransferBytesOnMessageInMemory", "maxTransferCountOnMessageInMemory",
    "maxTransferBytesOnMessageInDisk", "maxTransferCountOnMessageInDisk",
    "accessMessageInMemoryMaxRatio", "messageIndexEnable", "maxHashSlotNum", "maxIndexNum",
    "maxMsgsNumBatch", "messageIndexSafe", "haListenPort", "haSendHeartbeatInterval",
    "haHousekeepingInterval", "haTransferBatchSize", "haMasterAddress", "haMaxGapNotInSync",
    "brokerRole", "flushDiskType", "syncFlushTimeout", "putMessageTimeout", "slaveTimeout",
    "messageDelayLevel", "flushDelayOffsetInterval", "cleanFileForciblyEnable",
    "warmMapedFileEnable", "offsetCheckInSlave", "debugLockEnable", "duplicationEnable",
    "diskFallRecorded", "osPageCacheBusyTimeOutMills", "defaultQueryMaxNum",
    "transientStorePoolEnable", "transientStorePoolSize", "fastFailIfNoBufferInStorePool",
    "writeWithoutMmap", "enableDLegerCommitLog", "dLegerGroup", "dLegerPeers", "dLegerSelfId",
    "preferredLeaderId", "enableBatchPush", "enableScheduleMessageStats", "enableLmq",
    "enableMultiDispatch", "maxLmqConsumeQueueNum", "enableScheduleAsyncDeliver",
    "scheduleAsyncDeliverMaxPendingLimit", "scheduleAsyncDeliverMaxResendNum2Blocked",
    "maxBatchDeleteFilesNum", "dispatchCqThreads", "dispatchCqCacheNum", "enableAsyncReput",
    "recheckReputOffsetFromCq", "maxTopicLength", "autoMessageVersionOnTopicLen",
    "enabledAppendPropCRC", "forceVerifyPropCRC", "travelCqFileNumWhenGetMessage",
    "correctLogicMinOffsetSleepInterval", "correctLogicMinOffsetForceInterval",
    "mappedFileSwapEnable", "commitLogForceSwapMapInterval", "commitLogSwapMapInterval",
    "commitLogSwapMapReserveFileNum", "logicQueueForceSwapMapInterval",
    "logicQueueSwapMapInterval", "cleanSwapedMapInterval", "logicQueueSwapMapReserveFileNum",
    "searchBcqByCacheEnable", "dispatchFromSenderThread", "wakeCommitWhenPutMessage",
    "wakeFlushWhenPutMessage", "enableCleanExpiredOffset", "maxAsyncPutMessageRequests",
    "pullBatchMaxMessageCount", "totalReplicas", "inSyncReplicas", "minInSyncReplicas",
    "allAckInSyncStateSet", "enableAutoInSyncReplicas", "haFlowControlEnable",
    "maxHaTransferByteInSecond", "haMaxTimeSlaveNotCatchup", "syncMasterFlushOffsetWhenStartup",
    "maxChecksumRange", "replicasPerDiskPartition", "logicalDiskSpaceCleanForciblyThreshold",
    "maxSlaveResendLength", "syncFromLastFile", "asyncLearner", "maxConsumeQueueScan",
    "sampleCountThreshold", "coldDataFlowControlEnable", "coldDataScanEnable",
    "dataReadAheadEnable", "timerColdDataCheckIntervalMs", "sampleSteps",
    "accessMessageInMemoryHotRatio", "enableBuildConsumeQueueConcurrently",
    "batchDispatchRequestThreadPoolNums", "cleanRocksDBDirtyCQIntervalMin",
    "statRocksDBCQIntervalSec", "memTableFlushIntervalMs", "realTimePersistRocksDBConfig",
    "enableRocksDBLog", "topicQueueLockNum", "readUnCommitted",
    "putConsumeQueueDataByFileChannel", "rocksdbCQDoubleWriteEnable",
    "bottomMostCompressionTypeForConsumeQueueStore", "rocksdbCompressionType",
    "rocksdbFlushWalFrequency", "rocksdbWalFileRollingThreshold", "enableAcceleratedRecovery",
    "spinLockCollisionRetreatOptimalDegree", "useABSLock",
    "enableLogConsumeQueueRepeatedlyBuildWhenRecover",
})

NETTY_SERVER_CONFIG: frozenset[str] = frozenset({
    "bindAddress", "listenPort", "serverWorkerThreads", "serverCallbackExecutorThreads",
    "serverSelectorThreads", "serverOnewaySemaphoreValue", "serverAsyncSemaphoreValue",
    "serverChannelMaxIdleTimeSeconds", "serverSocketSndBufSize", "serverSocketRcvBufSize",
    "writeBufferHighWaterMark", "writeBufferLowWaterMark", "serverSocketBacklog",
    "serverNettyWorkerGroupEnable", "serverPooledByteBufAllocatorEnable",
    "enableShutdownGracefully", "shutdownWaitTimeSeconds", "useEpollNativeSelector",
})

NETTY_CLIENT_CONFIG: frozenset[str] = frozenset({
    "clientWorkerThreads", "clientCallbackExecutorThreads", "clientOnewaySemaphoreValue",
    "clientAsyncSemaphoreValue", "connectTimeoutMillis", "channelNotActiveInterval",
    "isScanAvailableNameSrv", "clientChannelMaxIdleTimeSeconds", "clientSocketSndBufSize",
    "clientSocketRcvBufSize", "clientPooledByteBufAllocatorEnable", "clientCloseSocketIfTimeout",
    "useTLS", "socksProxyConfig", "disableCallbackExecutor", "disableNettyWorkerGroup",
    "maxReconnectIntervalTimeSeconds", "enableReconnectForGoAway", "enableTransparentRetry",
})

NAMESRV_CONFIG: frozenset[str] = frozenset({
    "rocketmqHome", "kvConfigPath", "configStorePath", "productEnvName", "clusterTest",
    "orderMessageEnable", "returnOrderTopicConfigToBroker", "clientRequestThreadPoolNums",
    "defaultThreadPoolNums", "clientRequestThreadPoolQueueCapacity",
    "defaultThreadPoolQueueCapacity", "scanNotActiveBrokerInterval",
    "unRegisterBrokerQueueCapacity", "supportActingMaster", "enableAllTopicList",
    "enableTopicList", "notifyMinBrokerIdChanged", "enableControllerInNamesrv",
    "needWaitForService", "waitSecondsForService", "deleteTopicWithBrokerRegistration",
    "configBlackList",
})

CONTROLLER_CONFIG: frozenset[str] = frozenset({
    "rocketmqHome", "configStorePath", "controllerType", "scanNotActiveBrokerInterval",
    "controllerThreadPoolNums", "controllerRequestThreadPoolQueueCapacity",
    "controllerDLegerGroup", "controllerDLegerPeers", "controllerDLegerSelfId",
    "mappedFileSize", "controllerStorePath", "electMasterMaxRetryCount",
    "enableElectUncleanMaster", "isProcessReadEvent", "notifyBrokerRoleChanged",
    "scanInactiveMasterInterval", "configBlackList",
    # JraftConfig, read from the same file when controllerType=jRaft
    "jRaftElectionTimeoutMs", "jRaftScanWaitTimeoutMs", "jRaftSnapshotIntervalSecs",
    "jRaftGroupId", "jRaftServerId", "jRaftInitConf", "jRaftControllerRPCAddr",
}) | METRICS_EXPORTER

PROXY_CONFIG: frozenset[str] = frozenset({
    "rocketMQClusterName", "proxyClusterName", "proxyName", "localServeAddr",
    "heartbeatSyncerTopicClusterName", "heartbeatSyncerThreadPoolNums",
    "heartbeatSyncerThreadPoolQueueCapacity", "heartbeatSyncerTopicName", "enablePrintJstack",
    "printJstackInMillis", "printThreadPoolStatusInMillis", "namesrvAddr", "namesrvDomain",
    "namesrvDomainSubgroup", "tlsTestModeEnable", "tlsKeyPath", "tlsKeyPassword", "tlsCertPath",
    "proxyMode", "grpcServerPort", "grpcShutdownTimeSeconds", "grpcBossLoopNum",
    "grpcWorkerLoopNum", "enableGrpcEpoll", "grpcThreadPoolNums", "grpcThreadPoolQueueCapacity",
    "brokerConfigPath", "grpcMaxInboundMessageSize", "maxMessageSize",
    "enableMessageBodyEmptyCheck", "maxUserPropertySize", "userPropertyMaxNum",
    "maxMessageGroupSize", "defaultInvisibleTimeMills", "minInvisibleTimeMillsForRecv",
    "maxInvisibleTimeMills", "maxDelayTimeMills", "maxTransactionRecoverySecond",
    "enableTopicMessageTypeCheck", "grpcClientProducerMaxAttempts",
    "grpcClientProducerBackoffInitialMillis", "grpcClientProducerBackoffMaxMillis",
    "grpcClientProducerBackoffMultiplier", "grpcClientConsumerMinLongPollingTimeoutMillis",
    "grpcClientConsumerMaxLongPollingTimeoutMillis", "grpcClientConsumerLongPollingBatchSize",
    "grpcClientIdleTimeMills", "channelExpiredInSeconds", "contextExpiredInSeconds",
    "rocketmqMQClientNum", "grpcProxyRelayRequestTimeoutInSeconds",
    "grpcProducerThreadPoolNums", "grpcProducerThreadQueueCapacity",
    "grpcConsumerThreadPoolNums", "grpcConsumerThreadQueueCapacity", "grpcRouteThreadPoolNums",
    "grpcRouteThreadQueueCapacity", "grpcClientManagerThreadPoolNums",
    "grpcClientManagerThreadQueueCapacity", "grpcTransactionThreadPoolNums",
    "grpcTransactionThreadQueueCapacity", "producerProcessorThreadPoolNums",
    "producerProcessorThreadPoolQueueCapacity", "consumerProcessorThreadPoolNums",
    "consumerProcessorThreadPoolQueueCapacity", "useEndpointPortFromRequest",
    "topicRouteServiceCacheExpiredSeconds", "topicRouteServiceCacheRefreshSeconds",
    "topicRouteServiceCacheMaxNum", "topicRouteServiceThreadPoolNums",
    "topicRouteServiceThreadPoolQueueCapacity", "topicConfigCacheExpiredSeconds",
    "topicConfigCacheRefreshSeconds", "topicConfigCacheMaxNum",
    "subscriptionGroupConfigCacheExpiredSeconds", "subscriptionGroupConfigCacheRefreshSeconds",
    "subscriptionGroupConfigCacheMaxNum", "metadataThreadPoolNums",
    "metadataThreadPoolQueueCapacity", "transactionHeartbeatThreadPoolNums",
    "transactionHeartbeatThreadPoolQueueCapacity", "transactionHeartbeatPeriodSecond",
    "transactionHeartbeatBatchNum", "transactionDataExpireScanPeriodMillis",
    "transactionDataMaxWaitClearMillis", "transactionDataExpireMillis", "transactionDataMaxNum",
    "longPollingReserveTimeInMillis", "invisibleTimeMillisWhenClear", "enableProxyAutoRenew",
    "maxRenewRetryTimes", "renewThreadPoolNums", "renewMaxThreadPoolNums",
    "renewThreadPoolQueueCapacity", "lockTimeoutMsInHandleGroup", "renewAheadTimeMillis",
    "renewMaxTimeMillis", "renewSchedulePeriodMillis", "returnHandleGroupThreadPoolNums",
    "enableAclRpcHookForClusterMode", "useDelayLevel", "messageDelayLevel",
    "metricCollectorMode", "metricCollectorAddress", "regionId", "traceOn",
    "channelExpiredTimeout",
    "enableRemotingLocalProxyGrpc", "localProxyConnectTimeoutMs", "remotingAccessAddr",
    "remotingListenPort", "sendLatencyEnable", "startDetectorEnable", "detectTimeout",
    "detectInterval", "enableBatchAck",
}) | METRICS_EXPORTER

AUTH_CONFIG: frozenset[str] = frozenset({
    "authConfigPath", "authenticationEnabled", "authenticationProvider",
    "authenticationMetadataProvider", "authenticationStrategy", "authenticationWhitelist",
    "initAuthenticationUser", "innerClientAuthenticationCredentials", "authorizationEnabled",
    "authorizationProvider", "authorizationMetadataProvider", "authorizationStrategy",
    "authorizationWhitelist", "migrateAuthFromV1Enabled", "userCacheMaxNum",
    "userCacheExpiredSecond", "userCacheRefreshSecond", "aclCacheMaxNum",
    "aclCacheExpiredSecond", "aclCacheRefreshSecond", "statefulAuthenticationCacheMaxNum",
    "statefulAuthenticationCacheExpiredSecond", "statefulAuthorizationCacheMaxNum",
    "statefulAuthorizationCacheExpiredSecond",
})

LEGACY: frozenset[str] = frozenset({
    # RocketMQ 4's spellings, still found in old broker.conf files
    "mapedFileSizeCommitLog", "mapedFileSizeConsumeQueue",
})

BY_CLASS: Mapping[str, frozenset[str]] = {
    "BrokerConfig": BROKER_IDENTITY | BROKER_CONFIG,
    "MessageStoreConfig": MESSAGE_STORE_CONFIG | LEGACY,
    "NettyServerConfig": NETTY_SERVER_CONFIG,
    "NettyClientConfig": NETTY_CLIENT_CONFIG,
    "AuthConfig": AUTH_CONFIG,
    "NamesrvConfig": NAMESRV_CONFIG,
    "ControllerConfig": CONTROLLER_CONFIG,
    "ProxyConfig": PROXY_CONFIG,
}

ALL: frozenset[str] = frozenset().union(*BY_CLASS.values())
"""Every RocketMQ key listed here, whatever process reads it."""


def classes_of(key: str) -> list[str]:
    """The RocketMQ classes that read ``key`` (empty: not a RocketMQ key we know of)."""
    return [name for name, keys in BY_CLASS.items() if key in keys]
