"""GET_ALL_CONSUMER_OFFSET (43): what a slave copies from its master (RocketMQ's
SlaveSynchronize also reads topics and subscription groups, served by ``admin``)."""

from __future__ import annotations

import json

from mqcluster.broker.context import BrokerContext
from mqcluster.protocol.broker import RequestCode
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.rpc import Connection, HandlerRegistry


class SyncHandlers:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def register(self, registry: HandlerRegistry) -> None:
        registry.register(RequestCode.GET_ALL_CONSUMER_OFFSET, self.all_offsets)

    async def all_offsets(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        body = json.dumps(self.ctx.store.offsets.encode(), separators=(",", ":"))
        return cmd.response(body=body.encode("utf-8"))
