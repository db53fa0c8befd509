"""What the gRPC endpoint needs from the broker process (``BrokerContext`` fits)."""

from __future__ import annotations

from typing import Any, Protocol

from mqcluster.broker.messaging.store_port import MessageLog


class HostAddresses(Protocol):
    @property
    def grpc(self) -> str | None: ...


class MessagingHost(Protocol):
    """``config`` is read for the keys ``MessagingConfig`` knows (maxMessageSize,
    autoCreateTopicEnable, autoCreateSubscriptionGroup, defaultTopicQueueNums, ...), and
    on every request for ``brokerPermission``; its ``namesrv_addrs``, if any, are asked
    whether ``wipeWritePerm`` took the group's write permission away (routes);
    ``addresses.grpc`` is the advertised ``host:port`` put in routes (when None, routes
    name the address the client connected to); ``topics_changed()`` is called when the
    endpoint creates a topic, so the name-server registration can be refreshed;
    ``metrics`` is a ``BrokerMetrics`` (messages/bytes in and out, put errors) or None."""

    @property
    def config(self) -> Any: ...

    @property
    def store(self) -> MessageLog: ...

    @property
    def broker_name(self) -> str: ...

    @property
    def cluster_name(self) -> str: ...

    @property
    def broker_id(self) -> int: ...

    @property
    def addresses(self) -> HostAddresses: ...

    @property
    def metrics(self) -> Any: ...

    def topics_changed(self) -> None: ...
