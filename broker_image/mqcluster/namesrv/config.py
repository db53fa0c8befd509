"""Name server configuration: RocketMQ's NamesrvConfig and NettyServerConfig keys; the
remoting limits (serverFrameMaxLength, serverMaxConnections, ...) are ``ServerLimitKeys``."""

from __future__ import annotations

from pydantic import Field

from mqcluster.namesrv.route_info import DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS
from mqcluster.protocol.namesrv import DEFAULT_NAMESRV_PORT
from mqcluster.wire.server_keys import ServerLimitKeys


class NamesrvConfig(ServerLimitKeys):
    listenPort: int = Field(default=DEFAULT_NAMESRV_PORT, ge=0, le=65535)
    bindAddress: str = "0.0.0.0"
    rocketmqHome: str = ""
    brokerChannelExpiredTime: int = Field(default=DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS, gt=0)
    """Milliseconds without a registration or heartbeat before a broker is dropped."""
    scanNotActiveBrokerInterval: int = Field(default=5000, gt=0)
    """Milliseconds between scans for expired brokers."""
    supportActingMaster: bool = False
    deleteTopicWithBrokerRegistration: bool = False
    orderMessageEnable: bool = False
    clusterTest: bool = False
    enableControllerInNamesrv: bool = False
