"""NOTIFY_BROKER_ROLE_CHANGED goes through the client (BrokerApi.notify_role_changed): the
broker gets the controller's header and SyncStateSet body as RIP-44 lays them out."""

from __future__ import annotations

from mqcluster.client.broker_api import BrokerApi
from mqcluster.protocol.controller import (
    NotifyBrokerRoleChangedRequestHeader,
    RequestCode,
    SyncStateSetBody,
)
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.rpc import Connection, HandlerRegistry, RpcServer


async def test_the_broker_gets_the_header_and_body() -> None:
    got: list[RemotingCommand] = []

    async def on_notify(cmd: RemotingCommand, _conn: Connection) -> RemotingCommand:
        got.append(cmd)
        return cmd.response()

    registry = HandlerRegistry()
    registry.register(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, on_notify)
    server = RpcServer("127.0.0.1", 0, registry)
    await server.start()
    api = BrokerApi()
    try:
        header = NotifyBrokerRoleChangedRequestHeader(
            master_address="10.0.0.1:10911", master_epoch=3, sync_state_set_epoch=5,
            master_broker_id=1)
        body = SyncStateSetBody({1, 2}).encode()
        await api.notify_role_changed(f"127.0.0.1:{server.port}", header, body, timeout=2.0)
    finally:
        await api.close()
        await server.stop()
    (cmd,) = got
    assert NotifyBrokerRoleChangedRequestHeader.from_ext(cmd.ext_fields) == header
    assert SyncStateSetBody.decode(cmd.body or b"").sync_state_set == {1, 2}
