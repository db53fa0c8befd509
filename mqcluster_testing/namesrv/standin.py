"""A broker stand-in: registers with name servers and answers the admin requests mqadmin sends."""

from __future__ import annotations

from mqcluster.client.namesrv import BrokerRegistrar, NamesrvClient
from mqcluster.protocol.broker import RequestCode as BrokerRequestCode
from mqcluster.protocol.broker import decode_update_topic
from mqcluster.protocol.controller import EpochEntryCache, RequestCode
from mqcluster.protocol.epochs import EpochEntry
from mqcluster.protocol.namesrv import BrokerRegistration, TopicConfig
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.rpc import Connection, HandlerRegistry, RpcServer


class StandInBroker:
    def __init__(
        self,
        namesrv_addrs: list[str],
        *,
        host: str,
        broker_name: str = "broker-a",
        broker_id: int = 0,
        cluster: str = "DefaultCluster",
        topics: dict[str, TopicConfig] | None = None,
    ) -> None:
        self.cluster = cluster
        self.broker_name = broker_name
        self.broker_id = broker_id
        self.topics = dict(topics or {"TopicTest": TopicConfig(readQueueNums=4, writeQueueNums=4)})
        self.updates: list[TopicConfig] = []
        registry = HandlerRegistry()
        registry.register(RequestCode.GET_BROKER_EPOCH_CACHE, self._epoch_cache)
        registry.register(BrokerRequestCode.UPDATE_AND_CREATE_TOPIC, self._update_topic)
        self.server = RpcServer(host, 0, registry)
        self.client = NamesrvClient(namesrv_addrs)
        self.registrar = BrokerRegistrar(self.client, self.registration, interval=3600)

    @property
    def addr(self) -> str:
        return f"{self.server.host}:{self.server.port}"

    def registration(self) -> BrokerRegistration:
        return BrokerRegistration(
            clusterName=self.cluster,
            brokerName=self.broker_name,
            brokerAddr=self.addr,
            brokerId=self.broker_id,
            haServerAddr=f"{self.server.host}:{self.server.port + 1}",
            proxyAddr=f"{self.server.host}:8081",
            topicConfigTable=dict(self.topics),
        )

    async def start(self) -> None:
        await self.server.start()
        self.registrar.start()
        await self.registrar.wait_rounds(1)

    async def stop(self) -> None:
        await self.registrar.stop()
        await self.client.close()
        await self.server.stop()

    async def _epoch_cache(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        cache = EpochEntryCache(
            self.cluster,
            self.broker_name,
            self.broker_id,
            [EpochEntry(1, 0, 100), EpochEntry(2, 100, -1)],
            250,
        )
        return cmd.response(body=cache.encode())

    async def _update_topic(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        cfg = decode_update_topic(cmd).to_topic_config()
        self.updates.append(cfg)
        self.topics[cfg.topicName] = cfg
        self.registrar.trigger()
        return cmd.response()
