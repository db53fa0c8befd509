"""Internal-protocol request handlers of the broker, one module per concern."""

from __future__ import annotations

from mqcluster.broker.acl_gate import guard_of, remoting_gate
from mqcluster.broker.context import BrokerContext
from mqcluster.broker.handlers.admin import AdminHandlers
from mqcluster.broker.handlers.offsets import OffsetHandlers
from mqcluster.broker.handlers.ops import OpsHandlers
from mqcluster.broker.handlers.pull import PullHandlers
from mqcluster.broker.handlers.send import SendHandlers
from mqcluster.broker.handlers.sync import SyncHandlers
from mqcluster.broker.long_poll import ArrivalNotifier
from mqcluster.broker.messaging.clock import SystemClock
from mqcluster.broker.messaging.send import SendService
from mqcluster.broker.pull_service import PullService
from mqcluster.broker.topic_service import TopicService
from mqcluster.wire.rpc import HandlerRegistry


def build_registry(
    ctx: BrokerContext, arrivals: ArrivalNotifier, registry: HandlerRegistry | None = None
) -> HandlerRegistry:
    """Every broker request code, wired to its handler."""
    registry = registry or HandlerRegistry()
    topics = TopicService(ctx)
    sends = SendService(ctx.store, topics.access, limits=lambda: ctx.config, clock=SystemClock(),
                        batches=ctx.store, metrics=ctx.metrics)
    SendHandlers(sends).register(registry)
    PullHandlers(PullService(ctx, topics, arrivals)).register(registry)
    OffsetHandlers(ctx).register(registry)
    AdminHandlers(ctx, topics).register(registry)
    SyncHandlers(ctx).register(registry)
    OpsHandlers(ctx).register(registry)
    guard = guard_of(ctx.config)
    if guard is not None:
        registry.gate = remoting_gate(guard, ctx.config.brokerClusterName)
    return registry
