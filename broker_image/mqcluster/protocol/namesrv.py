"""Name server wire protocol: request codes, typed headers and JSON bodies.

Codes and field names follow RocketMQ's ``RequestCode`` / ``ResponseCode`` and
its remoting header classes, so a RocketMQ user recognises every field.
Headers travel as ``extFields`` (strings); bodies are JSON. Everything here is
pure: build a :class:`RemotingCommand` from a typed value, or parse one back.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mqcluster.wire.frame import FrameError, RemotingCommand
from mqcluster.wire.header import Header

MASTER_ID = 0
DEFAULT_NAMESRV_PORT = 9876

PERM_PRIORITY = 0x8
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1
DEFAULT_PERM = PERM_READ | PERM_WRITE


class RequestCode(IntEnum):
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_TOPIC_IN_NAMESRV = 216
    ADD_WRITE_PERM_OF_BROKER = 342
    GET_TOPICS_BY_CLUSTER = 224
    QUERY_DATA_VERSION = 322
    BROKER_HEARTBEAT = 904


class NamesrvResponseCode(IntEnum):
    """Response codes beyond the generic ones in :class:`mqcluster.wire.frame.ResponseCode`."""

    TOPIC_NOT_EXIST = 17


class Model(BaseModel):
    """Base of the JSON bodies and the values built from them: RocketMQ field names,
    unknown fields ignored. (Headers are :class:`mqcluster.wire.header.Header` structs.)"""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


# ---------------------------------------------------------------- headers


H = TypeVar("H", bound=BaseModel)


def parse_body(model: type[H], cmd: RemotingCommand) -> H:
    """Parse a JSON body into ``model``; a bad body raises FrameError."""
    try:
        return model.model_validate_json(cmd.body or b"{}")
    except ValidationError as exc:
        raise FrameError(f"bad {model.__name__} body: {exc.errors()[0]['msg']}") from None


def json_bytes(model: BaseModel) -> bytes:
    return model.model_dump_json().encode("utf-8")


class RegisterBrokerRequestHeader(Header):
    brokerName: str
    brokerAddr: str
    clusterName: str
    haServerAddr: str = ""
    brokerId: int
    heartbeatTimeoutMillis: int | None = None
    enableActingMaster: bool = False
    compressed: bool = False
    bodyCrc32: int = 0
    proxyAddr: str = ""
    """The client (gRPC) endpoint of this broker, host:port; empty if it serves none."""


class RegisterBrokerResponseHeader(Header):
    haServerAddr: str = ""
    masterAddr: str = ""


class UnRegisterBrokerRequestHeader(Header):
    brokerName: str
    brokerAddr: str
    clusterName: str
    brokerId: int


class GetRouteInfoRequestHeader(Header):
    topic: str


class WipeWritePermOfBrokerRequestHeader(Header):
    brokerName: str


class DeleteTopicFromNamesrvRequestHeader(Header):
    topic: str
    clusterName: str | None = None


class GetTopicsByClusterRequestHeader(Header):
    cluster: str


class BrokerHeartbeatHeader(Header):
    clusterName: str
    brokerAddr: str
    brokerName: str = ""


class QueryDataVersionHeader(Header):
    brokerName: str
    brokerAddr: str
    clusterName: str
    brokerId: int


class WipeWritePermResponseHeader(Header):
    wipeTopicCount: int


class AddWritePermResponseHeader(Header):
    addTopicCount: int


class QueryDataVersionResponseHeader(Header):
    changed: bool


# ---------------------------------------------------------------- bodies


class TopicConfig(Model):
    topicName: str = ""
    readQueueNums: int = 16
    writeQueueNums: int = 16
    perm: int = DEFAULT_PERM
    topicFilterType: str = "SINGLE_TAG"
    topicSysFlag: int = 0
    order: bool = False


class DataVersion(Model):
    timestamp: int = 0
    counter: int = 0


class TopicConfigSerializeWrapper(Model):
    topicConfigTable: dict[str, TopicConfig] = Field(default_factory=dict)
    dataVersion: DataVersion = Field(default_factory=DataVersion)


class RegisterBrokerBody(Model):
    topicConfigSerializeWrapper: TopicConfigSerializeWrapper = Field(
        default_factory=TopicConfigSerializeWrapper
    )
    filterServerList: list[str] = Field(default_factory=list)


class QueueData(Model):
    brokerName: str
    readQueueNums: int
    writeQueueNums: int
    perm: int
    topicSysFlag: int = 0


class BrokerData(Model):
    cluster: str
    brokerName: str
    brokerAddrs: dict[int, str] = Field(default_factory=dict)
    """brokerId -> remoting address; id 0 is the master."""
    enableActingMaster: bool = False
    proxyAddrs: dict[int, str] = Field(default_factory=dict)
    """brokerId -> client (gRPC) endpoint, for the replicas that serve one."""
    haServerAddrs: dict[int, str] = Field(default_factory=dict)

    def master_addr(self) -> str | None:
        return self.brokerAddrs.get(MASTER_ID)


class TopicRouteData(Model):
    orderTopicConf: str | None = None
    queueDatas: list[QueueData] = Field(default_factory=list)
    brokerDatas: list[BrokerData] = Field(default_factory=list)
    filterServerTable: dict[str, list[str]] = Field(default_factory=dict)


class ClusterInfo(Model):
    brokerAddrTable: dict[str, BrokerData] = Field(default_factory=dict)
    """brokerName -> BrokerData."""
    clusterAddrTable: dict[str, list[str]] = Field(default_factory=dict)
    """clusterName -> brokerNames."""

    def master_addrs(self, cluster: str | None = None) -> list[str]:
        """Master addresses of every broker group, or of one cluster's groups."""
        names = self.clusterAddrTable.get(cluster, []) if cluster else list(self.brokerAddrTable)
        out = []
        for name in names:
            data = self.brokerAddrTable.get(name)
            addr = data.master_addr() if data else None
            if addr:
                out.append(addr)
        return out


class TopicList(Model):
    topicList: list[str] = Field(default_factory=list)
    brokerAddr: str | None = None


class BrokerRegistration(Model):
    """Everything a broker tells the name server, header and body together."""

    clusterName: str
    brokerName: str
    brokerAddr: str
    brokerId: int
    haServerAddr: str = ""
    proxyAddr: str = ""
    heartbeatTimeoutMillis: int | None = None
    enableActingMaster: bool = False
    topicConfigTable: dict[str, TopicConfig] = Field(default_factory=dict)
    dataVersion: DataVersion = Field(default_factory=DataVersion)


class RegisterBrokerResult(Model):
    haServerAddr: str = ""
    masterAddr: str = ""


# ---------------------------------------------------------------- commands


def encode_register_broker(reg: BrokerRegistration) -> RemotingCommand:
    header = RegisterBrokerRequestHeader(
        brokerName=reg.brokerName,
        brokerAddr=reg.brokerAddr,
        clusterName=reg.clusterName,
        haServerAddr=reg.haServerAddr,
        brokerId=reg.brokerId,
        heartbeatTimeoutMillis=reg.heartbeatTimeoutMillis,
        enableActingMaster=reg.enableActingMaster,
        proxyAddr=reg.proxyAddr,
    )
    body = RegisterBrokerBody(
        topicConfigSerializeWrapper=TopicConfigSerializeWrapper(
            topicConfigTable=reg.topicConfigTable, dataVersion=reg.dataVersion
        )
    )
    return RemotingCommand.request(
        RequestCode.REGISTER_BROKER, header.to_ext(), json_bytes(body)
    )


def decode_register_broker(cmd: RemotingCommand) -> BrokerRegistration:
    header = RegisterBrokerRequestHeader.from_ext(cmd.ext_fields)
    body = parse_body(RegisterBrokerBody, cmd)
    wrapper = body.topicConfigSerializeWrapper
    topics = {
        name: cfg if cfg.topicName else cfg.model_copy(update={"topicName": name})
        for name, cfg in wrapper.topicConfigTable.items()
    }
    return BrokerRegistration(
        clusterName=header.clusterName,
        brokerName=header.brokerName,
        brokerAddr=header.brokerAddr,
        brokerId=header.brokerId,
        haServerAddr=header.haServerAddr,
        proxyAddr=header.proxyAddr,
        heartbeatTimeoutMillis=header.heartbeatTimeoutMillis,
        enableActingMaster=header.enableActingMaster,
        topicConfigTable=topics,
        dataVersion=wrapper.dataVersion,
    )


def encode_unregister_broker(header: UnRegisterBrokerRequestHeader) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.UNREGISTER_BROKER, header.to_ext())


def encode_get_route(topic: str) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=topic).to_ext()
    )


def encode_simple(code: RequestCode, **fields: Any) -> RemotingCommand:
    return RemotingCommand.request(code, fields)
