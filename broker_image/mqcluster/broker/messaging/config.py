"""Settings of the message service, with RocketMQ's key names (broker and proxy keys)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from mqcluster.common.config import RocketConfig

PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]


class MessagingConfig(RocketConfig):
    brokerClusterName: str = "DefaultCluster"
    brokerName: str = "broker-a"
    brokerId: NonNegativeInt = 0

    grpcRouteAccessPoint: bool = False
    """Routes name the address the client connected to (a Service or load balancer in front
    of the master) instead of this broker's own address, so they survive a failover."""

    autoCreateTopicEnable: bool = True
    autoCreateSubscriptionGroup: bool = True
    defaultTopicQueueNums: PositiveInt = 8

    maxMessageSize: PositiveInt = 4 * 1024 * 1024
    maxUserPropertySize: PositiveInt = 16 * 1024
    maxUserPropertyCount: PositiveInt = 128
    maxMessageGroupSize: PositiveInt = 64
    maxMessageIdSize: PositiveInt = 128

    minInvisibleTimeMillsForRecv: NonNegativeInt = 10_000
    maxInvisibleTimeMills: PositiveInt = 12 * 3600 * 1000
    defaultInvisibleTimeMills: PositiveInt = 60_000
    grpcClientConsumerLongPollingTimeoutMillis: PositiveInt = 20_000
    grpcClientConsumerMaxLongPollingTimeoutMillis: PositiveInt = 30_000
    maxReceiveBatchSize: PositiveInt = 32
    reviveIntervalMills: PositiveInt = 1_000
    renewAheadTimeMillis: PositiveInt = 10_000
    renewMaxTimeMillis: PositiveInt = 3 * 3600 * 1000

    timerMaxDelaySec: PositiveInt = 3 * 24 * 3600

    transactionTimeOut: PositiveInt = 6_000
    transactionCheckMax: PositiveInt = 15
    transactionCheckInterval: PositiveInt = 30_000

    producerMaxAttempts: PositiveInt = 3

    @classmethod
    def from_broker(cls, broker_config: Any, **overrides: Any) -> MessagingConfig:
        """Take every key this model knows from a broker config object, then ``overrides``."""
        values = {name: getattr(broker_config, name) for name in cls.model_fields
                  if getattr(broker_config, name, None) is not None}
        values.update(overrides)
        return cls.model_validate(values)
