"""Request handlers of the name server: remoting commands in, RouteInfoManager calls out."""

from __future__ import annotations

import logging

from mqcluster.namesrv.route_info import RemovedBroker, RouteInfoManager
from mqcluster.protocol.namesrv import (
    AddWritePermResponseHeader,
    BrokerHeartbeatHeader,
    ClusterInfo,
    DataVersion,
    DeleteTopicFromNamesrvRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    NamesrvResponseCode,
    QueryDataVersionHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerResponseHeader,
    RequestCode,
    TopicList,
    UnRegisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermResponseHeader,
    decode_register_broker,
    json_bytes,
    parse_body,
)
from mqcluster.wire.frame import RemotingCommand, ResponseCode
from mqcluster.wire.rpc import Connection, HandlerRegistry

log = logging.getLogger(__name__)


def log_removed(removed: list[RemovedBroker]) -> None:
    for r in removed:
        log.info(
            "broker %s %s (%s) removed: %s", r.cluster_name, r.broker_name, r.broker_addr, r.reason
        )


class NamesrvProcessor:
    def __init__(self, routes: RouteInfoManager) -> None:
        self.routes = routes

    def install(self, registry: HandlerRegistry) -> None:
        handlers = {
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.BROKER_HEARTBEAT: self.broker_heartbeat,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_topic_list,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
        }
        for code, handler in handlers.items():
            registry.register(code, handler)
        registry.on_connection_closed.append(self.on_connection_closed)

    def on_connection_closed(self, conn: Connection) -> None:
        log_removed(self.routes.on_channel_closed(conn))

    async def register_broker(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        reg = decode_register_broker(cmd)
        known = (reg.clusterName, reg.brokerAddr) in self.routes.live
        result = self.routes.register_broker(reg, conn)
        if not known:
            log.info(
                "broker registered: %s %s id=%d %s (%d topics)",
                reg.clusterName,
                reg.brokerName,
                reg.brokerId,
                reg.brokerAddr,
                len(reg.topicConfigTable),
            )
        header = RegisterBrokerResponseHeader(
            haServerAddr=result.haServerAddr, masterAddr=result.masterAddr
        )
        return cmd.response(ext_fields=header.to_ext())

    async def unregister_broker(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = UnRegisterBrokerRequestHeader.from_ext(cmd.ext_fields)
        removed = self.routes.unregister_broker(h.clusterName, h.brokerName, h.brokerAddr)
        log_removed([removed] if removed else [])
        return cmd.response()

    async def broker_heartbeat(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = BrokerHeartbeatHeader.from_ext(cmd.ext_fields)
        self.routes.broker_heartbeat(h.clusterName, h.brokerAddr)
        return cmd.response()

    async def query_data_version(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = QueryDataVersionHeader.from_ext(cmd.ext_fields)
        version = parse_body(DataVersion, cmd)
        changed = self.routes.is_data_version_changed(h.clusterName, h.brokerAddr, version)
        self.routes.broker_heartbeat(h.clusterName, h.brokerAddr)
        return cmd.response(
            ext_fields=QueryDataVersionResponseHeader(changed=changed).to_ext()
        )

    async def get_route(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = GetRouteInfoRequestHeader.from_ext(cmd.ext_fields)
        route = self.routes.pickup_topic_route(h.topic)
        if route is None:
            return cmd.response(
                NamesrvResponseCode.TOPIC_NOT_EXIST,
                remark=f"No topic route info in name server for the topic: {h.topic}",
            )
        return cmd.response(body=json_bytes(route))

    async def get_cluster_info(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        info: ClusterInfo = self.routes.cluster_info()
        return cmd.response(body=json_bytes(info))

    async def get_topic_list(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        return cmd.response(body=json_bytes(TopicList(topicList=self.routes.topic_list())))

    async def get_topics_by_cluster(
        self, cmd: RemotingCommand, conn: Connection
    ) -> RemotingCommand:
        h = GetTopicsByClusterRequestHeader.from_ext(cmd.ext_fields)
        topics = self.routes.topics_by_cluster(h.cluster)
        return cmd.response(body=json_bytes(TopicList(topicList=topics)))

    async def wipe_write_perm(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = WipeWritePermOfBrokerRequestHeader.from_ext(cmd.ext_fields)
        n = self.routes.wipe_write_perm(h.brokerName)
        return cmd.response(ext_fields=WipeWritePermResponseHeader(wipeTopicCount=n).to_ext())

    async def add_write_perm(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = WipeWritePermOfBrokerRequestHeader.from_ext(cmd.ext_fields)
        n = self.routes.add_write_perm(h.brokerName)
        return cmd.response(ext_fields=AddWritePermResponseHeader(addTopicCount=n).to_ext())

    async def delete_topic(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        h = DeleteTopicFromNamesrvRequestHeader.from_ext(cmd.ext_fields)
        self.routes.delete_topic(h.topic, h.clusterName)
        return cmd.response(ResponseCode.SUCCESS)
