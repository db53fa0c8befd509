from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest_asyncio

from mqcluster.broker.config import load_broker_config
from mqcluster.broker.server import BrokerServer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


BrokerFactory = Callable[..., Any]


@pytest_asyncio.fixture
async def broker_factory(tmp_path: Path) -> AsyncIterator[BrokerFactory]:
    """Starts in-process brokers (no name server) on 127.0.0.1; stops them afterwards."""
    servers: list[BrokerServer] = []

    async def start(**props: str) -> BrokerServer:
        n = len(servers)
        cfg = load_broker_config(
            None,
            {
                "brokerName": f"broker-{n}",
                "bindAddress": "127.0.0.1",
                "brokerIP1": "127.0.0.1",
                "listenPort": str(_free_port()),
                "haListenPort": str(_free_port()),
                "storePathRootDir": str(tmp_path / f"store-{n}"),
                "mappedFileSizeCommitLog": str(16 * 1024 * 1024),
                "enableProxy": "false",
                "metricsExporterType": "DISABLE",
                **props,
            },
        )
        server = BrokerServer(cfg)
        servers.append(server)
        await server.start()
        return server

    try:
        yield start
    finally:
        for server in servers:
            await server.stop()
