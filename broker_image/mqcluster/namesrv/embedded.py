"""The controller embedded in a name server (``enableControllerInNamesrv=true``).

The controller reads its keys (controllerDLegerGroup, controllerDLegerPeers,
controllerDLegerSelfId, controllerStorePath, ...) from the name server's file.
It serves on its own ``controllerDLegerPeers`` address, as a standalone
controller does, and its API is also served on the name server's port, as
RocketMQ's embedded controller shares the name server's remoting server, so
brokers may use either address as ``controllerAddr``.

BROKER_HEARTBEAT (904) is both a name server and a controller request: on the
shared port it refreshes the broker's route entry and then goes to the controller.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from mqcluster.common.config import build_config
from mqcluster.namesrv.route_info import RouteInfoManager
from mqcluster.protocol.namesrv import BrokerHeartbeatHeader, RequestCode
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.header import HeaderError
from mqcluster.wire.rpc import Connection, HandlerRegistry

if TYPE_CHECKING:
    from mqcluster.controller.service import ConsensusFactory

log = logging.getLogger(__name__)

NAMESRV_ONLY_KEYS = frozenset({"listenPort", "bindAddress"})
"""Name server keys that must not configure the controller (it keeps its own port)."""


class EmbeddedControllerUnavailable(RuntimeError):
    """The controller package cannot be embedded."""


class EmbeddedController(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...


def controller_keys() -> frozenset[str]:
    """Every key the controller reads; empty when the controller package is missing."""
    try:
        from mqcluster.controller.config import ControllerConfig
    except ImportError:
        return frozenset()
    return frozenset(ControllerConfig.model_fields)


def build_embedded_controller(
    props: dict[str, str],
    registry: HandlerRegistry,
    routes: RouteInfoManager,
    *,
    source: str = "<config>",
    consensus_factory: ConsensusFactory | None = None,
) -> EmbeddedController:
    """A controller configured from ``props``, its API also served on ``registry``.

    Raises ConfigError for a bad controller key, EmbeddedControllerUnavailable
    when the controller cannot be built.
    """
    try:
        from mqcluster.controller.config import ControllerConfig
        from mqcluster.controller.service import ControllerService
        from mqcluster.protocol.controller import RequestCode as ControllerCode
    except ImportError as exc:
        raise EmbeddedControllerUnavailable(f"embedded controller unavailable: {exc}") from exc

    own = {
        k: v
        for k, v in props.items()
        if k in ControllerConfig.model_fields and k not in NAMESRV_ONLY_KEYS
    }
    config = build_config(ControllerConfig, own, source)
    try:
        service = ControllerService(config, consensus_factory=consensus_factory)
    except ImportError as exc:
        raise EmbeddedControllerUnavailable(f"embedded controller unavailable: {exc}") from exc

    inner = HandlerRegistry()
    service.register_handlers(inner)

    async def forward(cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        return await inner.dispatch(cmd, conn)

    async def heartbeat(cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        try:
            h = BrokerHeartbeatHeader.from_command(cmd)
        except HeaderError:
            pass
        else:
            routes.broker_heartbeat(h.clusterName, h.brokerAddr)
        return await inner.dispatch(cmd, conn)

    for code in ControllerCode:
        registry.register(
            code, heartbeat if int(code) == int(RequestCode.BROKER_HEARTBEAT) else forward
        )

    def closed(conn: Connection) -> None:
        for cb in inner.on_connection_closed:
            cb(conn)

    registry.on_connection_closed.append(closed)
    log.info("embedded controller %s configured", config.controllerDLegerSelfId)
    embedded: EmbeddedController = service
    return embedded
