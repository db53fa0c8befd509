"""The Settings the server answers a client's Settings with (on the Telemetry stream)."""

from __future__ import annotations

from rocketmq.grpc_protocol import definition_pb2 as pb

from mqcluster.broker.grpc.convert import duration
from mqcluster.broker.messaging.service import MessagingService

# RocketMQ's message delay levels: the default redelivery backoff of consumer groups.
CONSUMER_BACKOFF_MS = (
    1_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000,
    420_000, 480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000,
)
PRODUCER_BACKOFF_INITIAL_MS = 10
PRODUCER_BACKOFF_MAX_MS = 1_000
PRODUCER_BACKOFF_MULTIPLIER = 2.0


def server_settings(client: pb.Settings, service: MessagingService) -> pb.Settings:
    """Raises MessagingError when a consumer's group may not consume."""
    cfg = service.config
    out = pb.Settings()
    out.CopyFrom(client)
    out.metric.Clear()
    out.metric.on = False
    if client.HasField("publishing") or client.client_type == pb.ClientType.PRODUCER:
        out.publishing.max_body_size = cfg.maxMessageSize
        out.publishing.validate_message_type = True
        policy = out.backoff_policy
        policy.Clear()
        policy.max_attempts = cfg.producerMaxAttempts
        policy.exponential_backoff.initial.CopyFrom(duration(PRODUCER_BACKOFF_INITIAL_MS))
        policy.exponential_backoff.max.CopyFrom(duration(PRODUCER_BACKOFF_MAX_MS))
        policy.exponential_backoff.multiplier = PRODUCER_BACKOFF_MULTIPLIER
    elif client.HasField("subscription"):
        group = service.catalog.group(client.subscription.group.name)
        sub = out.subscription
        sub.fifo = group.consumeMessageOrderly
        sub.receive_batch_size = cfg.maxReceiveBatchSize
        sub.long_polling_timeout.CopyFrom(
            duration(cfg.grpcClientConsumerLongPollingTimeoutMillis))
        policy = out.backoff_policy
        policy.Clear()
        policy.max_attempts = group.retryMaxTimes + 1
        policy.customized_backoff.next.extend(duration(ms) for ms in CONSUMER_BACKOFF_MS)
    return out
