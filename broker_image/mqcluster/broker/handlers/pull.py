"""PULL_MESSAGE (11)."""

from __future__ import annotations

from mqcluster.broker.pull_service import PullService
from mqcluster.protocol.broker import (
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    RequestCode,
)
from mqcluster.protocol.messages import encode_pulled
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.rpc import Connection, HandlerRegistry


class PullHandlers:
    def __init__(self, service: PullService) -> None:
        self.service = service

    def register(self, registry: HandlerRegistry) -> None:
        registry.register(RequestCode.PULL_MESSAGE, self.pull)

    async def pull(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        header = PullMessageRequestHeader.from_ext(cmd.ext_fields)
        out = await self.service.pull(header)
        resp_header = PullMessageResponseHeader(
            nextBeginOffset=out.next_begin_offset,
            minOffset=out.min_offset,
            maxOffset=out.max_offset,
        )
        body = encode_pulled(out.messages) if out.messages else b""
        return cmd.response(
            out.code, remark=out.remark, ext_fields=resp_header.to_ext(), body=body
        )
