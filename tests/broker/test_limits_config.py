"""The broker's remoting limit keys: defaults that follow maxMessageSize, errors naming the
key, and the limits reaching both of a DLedger broker's listeners."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mqcluster.broker.config import BrokerConfig, check_broker_config, load_broker_config
from mqcluster.broker.server import BrokerServer
from mqcluster.common.config import ConfigError
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.limits import process_limits, set_process_limits
from mqcluster.wire.rpc import RpcClient
from mqcluster_testing.procs import free_addr

MIB = 1024 * 1024


def test_the_largest_frame_follows_max_message_size_unless_set() -> None:
    assert BrokerConfig(brokerName="b").server_limits().max_frame_size == 16 * MIB
    big = BrokerConfig(brokerName="b", maxMessageSize=16 * MIB).server_limits()
    assert big.max_frame_size == 32 * MIB + 64 * 1024
    assert big.max_partial_bytes == big.max_frame_size + 4  # unset: holds the largest frame
    cfg = load_broker_config(None, {"brokerName": "b", "serverFrameMaxLength": str(8 * MIB),
                                    "serverPartialFramesMaxBytes": str(10 * MIB)})
    assert cfg.server_limits().max_frame_size == 8 * MIB
    assert cfg.server_limits().max_partial_bytes == 10 * MIB


def test_a_largest_frame_too_small_for_a_message_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match="key 'serverFrameMaxLength' \\(1048576\\): 1048576 "
                       "cannot carry a message of maxMessageSize=4194304"):
        load_broker_config(None, {"brokerName": "b", "serverFrameMaxLength": str(MIB)})


@pytest.mark.parametrize(("key", "value"), [
    ("serverMaxConnections", "-1"), ("serverChannelMaxIdleTimeSeconds", "x"),
    ("serverFrameReadTimeoutSeconds", "-1"), ("serverPartialFramesMaxBytes", "12"),
])
def test_a_bad_value_names_its_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"key '{key}' \\('{value}'\\)"):
        load_broker_config(None, {"brokerName": "b", key: value})


async def refused(addr: str) -> bool:
    """A connection to ``addr`` is closed by the server before any request."""
    host, port = addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        return await asyncio.wait_for(reader.read(), 10) == b""
    except ConnectionResetError:
        return True
    finally:
        writer.close()


async def test_the_remoting_and_raft_ports_of_a_dledger_broker_take_the_limits(
        tmp_path: Path) -> None:
    ip = "127.0.0.1"
    raft = free_addr(ip)

    def port() -> int:
        return int(free_addr(ip).rsplit(":", 1)[1])

    cfg = check_broker_config(BrokerConfig.model_validate({
        "brokerName": "limits", "brokerIP1": ip, "bindAddress": ip, "listenPort": port(),
        "haListenPort": port(), "enableProxy": False, "metricsExporterType": "DISABLE",
        "storePathRootDir": str(tmp_path), "mappedFileSizeCommitLog": MIB,
        "maxMessageSize": 64 * 1024, "enableDLegerCommitLog": True, "dLegerGroup": "limits",
        "dLegerPeers": f"n0-{raft}", "dLegerSelfId": "n0",
        "serverMaxConnections": 1,
    }))
    before = process_limits()
    broker = BrokerServer(cfg)
    try:
        await broker.start()
        assert process_limits() == cfg.server_limits()
        for addr in (f"{ip}:{cfg.listenPort}", raft):
            held = RpcClient()
            # (answered, even if not supported: the server has accepted the connection)
            await held.invoke(addr, RemotingCommand.request(99_999))
            assert await refused(addr), addr
            await held.close()
    finally:
        await broker.stop()
        set_process_limits(before)
