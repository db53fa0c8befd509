"""Which endpoint QueryRoute advertises: the broker's own, or the client's access point."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from mqcluster.broker.config import BrokerConfig
from mqcluster.broker.grpc.server import route_address
from mqcluster.broker.messaging.config import MessagingConfig
from tests.broker.grpc.harness import Addresses, Host


def host(grpc_addr: str, **config: Any) -> Host:
    h = Host(MessagingConfig(**config), cast(Any, None))
    h.addresses = Addresses(grpc=grpc_addr)
    return h


def test_routes_name_the_broker_by_default() -> None:
    h = host("10.1.2.3:8081")
    assert route_address(h, h.config) == "10.1.2.3:8081"


def test_routes_name_the_access_point_behind_a_service() -> None:
    h = host("10.1.2.3:8081", grpcRouteAccessPoint=True)
    assert route_address(h, h.config) is None


def test_broker_config_key_reaches_the_messaging_config(tmp_path: Path) -> None:
    broker = BrokerConfig(grpcRouteAccessPoint=True, storePathRootDir=str(tmp_path))
    assert MessagingConfig.from_broker(broker).grpcRouteAccessPoint is True
