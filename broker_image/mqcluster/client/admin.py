"""Admin client: topics, subscription groups, offsets and runtime info of brokers."""

from __future__ import annotations

from mqcluster.auth.credentials import Credentials
from mqcluster.client.broker_api import DEFAULT_TIMEOUT, BrokerApi
from mqcluster.client.errors import ClientError
from mqcluster.client.namesrv import NamesrvClient, NamesrvError
from mqcluster.protocol.broker import CreateTopicRequestHeader, SubscriptionGroupConfig
from mqcluster.protocol.namesrv import DEFAULT_PERM, TopicConfig


class AdminClient:
    """Talks to one broker (``broker_addr``) or to every master the name servers know.

    Methods that take ``broker_addr`` use it when given, else the client's broker,
    else (for writes) every master of ``cluster`` (all clusters when None).
    """

    def __init__(
        self,
        *,
        namesrv_addr: str | None = None,
        broker_addr: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        credentials: Credentials | None = None,
    ) -> None:
        if not namesrv_addr and not broker_addr:
            raise ValueError("give namesrv_addr or broker_addr")
        self.api = BrokerApi(timeout=timeout, credentials=credentials)
        self.namesrv = NamesrvClient(namesrv_addr, rpc=self.api.rpc) if namesrv_addr else None
        self.broker_addr = broker_addr

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.api.close()

    async def master_addrs(self, cluster: str | None = None) -> list[str]:
        if self.broker_addr:
            return [self.broker_addr]
        assert self.namesrv is not None
        try:
            info = await self.namesrv.get_cluster_info()
        except NamesrvError as exc:
            raise ClientError(str(exc)) from exc
        return info.master_addrs(cluster)

    def _one(self, broker_addr: str | None) -> str:
        addr = broker_addr or self.broker_addr
        if not addr:
            raise ClientError("no broker address given")
        return addr

    async def create_topic(
        self,
        topic: str,
        queue_nums: int = 8,
        *,
        broker_addr: str | None = None,
        cluster: str | None = None,
        perm: int = DEFAULT_PERM,
        order: bool = False,
    ) -> list[str]:
        """Create (or update) the topic; returns the broker addresses it was created on."""
        header = CreateTopicRequestHeader(
            topic=topic,
            readQueueNums=queue_nums,
            writeQueueNums=queue_nums,
            perm=perm,
            order=order,
        )
        addrs = [broker_addr] if broker_addr else await self.master_addrs(cluster)
        if not addrs:
            raise ClientError(f"no master broker found for cluster {cluster!r}")
        for addr in addrs:
            await self.api.create_topic(addr, header)
        return addrs

    async def delete_topic(
        self, topic: str, *, broker_addr: str | None = None, cluster: str | None = None
    ) -> None:
        addrs = [broker_addr] if broker_addr else await self.master_addrs(cluster)
        for addr in addrs:
            await self.api.delete_topic(addr, topic)

    async def topic_configs(self, broker_addr: str | None = None) -> dict[str, TopicConfig]:
        return await self.api.get_all_topic_config(self._one(broker_addr))

    async def create_subscription_group(
        self, group: str, *, broker_addr: str | None = None, cluster: str | None = None
    ) -> None:
        cfg = SubscriptionGroupConfig(groupName=group)
        addrs = [broker_addr] if broker_addr else await self.master_addrs(cluster)
        for addr in addrs:
            await self.api.create_subscription_group(addr, cfg)

    async def max_offset(self, topic: str, queue_id: int, broker_addr: str | None = None) -> int:
        return await self.api.max_offset(self._one(broker_addr), topic, queue_id)

    async def min_offset(self, topic: str, queue_id: int, broker_addr: str | None = None) -> int:
        return await self.api.min_offset(self._one(broker_addr), topic, queue_id)

    async def consumer_offset(
        self, group: str, topic: str, queue_id: int, broker_addr: str | None = None
    ) -> int | None:
        return await self.api.query_consumer_offset(self._one(broker_addr), group, topic, queue_id)

    async def runtime_info(self, broker_addr: str | None = None) -> dict[str, str]:
        return await self.api.runtime_info(self._one(broker_addr))
