"""Client requests of a standalone ``mqraft`` member: propose, status, read, transfer."""

from __future__ import annotations

import dataclasses
import json

from mqcluster.raft.codec import unpack_values
from mqcluster.raft.codes import RaftRequestCode, RaftResponseCode
from mqcluster.raft.limits import LimitError, check_id, parse_long
from mqcluster.raft.node import ProposalError, RaftNotLeaderError, RaftRunner
from mqcluster.raft.types import NotLeaderError
from mqcluster.raft.valuelog import ValueLog
from mqcluster.wire.frame import RemotingCommand, ResponseCode
from mqcluster.wire.rpc import Connection, HandlerRegistry

_MAX_READ = 100_000  # values in one CLIENT_READ answer


def _not_leader(cmd: RemotingCommand, err: NotLeaderError) -> RemotingCommand:
    addr = err.leader_addr if isinstance(err, RaftNotLeaderError) else None
    return cmd.response(
        RaftResponseCode.NOT_LEADER,
        remark=str(err),
        ext_fields={"leaderId": err.leader_id, "leaderAddr": addr},
    )


class ValueLogService:
    def __init__(self, runner: RaftRunner, values: ValueLog) -> None:
        self.runner = runner
        self.values = values

    def register(self, registry: HandlerRegistry) -> None:
        registry.register(RaftRequestCode.CLIENT_PROPOSE, self.propose)
        registry.register(RaftRequestCode.CLIENT_STATUS, self.status)
        registry.register(RaftRequestCode.CLIENT_READ, self.read)
        registry.register(RaftRequestCode.CLIENT_TRANSFER_LEADERSHIP, self.transfer)

    async def propose(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        values = unpack_values(cmd.body)
        if not values:
            return cmd.response(ResponseCode.INVALID_REQUEST, remark="no values to propose")
        try:
            results = await self.runner.propose_batch(values)
        except NotLeaderError as err:
            return _not_leader(cmd, err)
        except ProposalError as err:
            return cmd.response(RaftResponseCode.PROPOSAL_FAILED, remark=str(err))
        return cmd.response(ext_fields={"first": results[0], "last": results[-1]})

    async def status(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        doc = self.runner.status().to_json() | self.values.summary()
        doc["stats"] = dataclasses.asdict(self.runner.stats)
        return cmd.response(body=json.dumps(doc).encode())

    async def read(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        try:
            start = parse_long(cmd.ext_fields.get("start", "1"), "start")
            limit = min(parse_long(cmd.ext_fields.get("limit", "1000"), "limit"), _MAX_READ)
        except LimitError as exc:
            return cmd.response(ResponseCode.INVALID_REQUEST, remark=str(exc))
        doc = self.values.summary() | {
            "start": max(start, self.values.first_kept),
            "values": [v.decode("latin-1") for v in self.values.read(start, limit)],
        }
        return cmd.response(body=json.dumps(doc).encode())

    async def transfer(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        try:
            target = check_id(cmd.ext_fields.get("target"), "target")
        except LimitError as exc:
            return cmd.response(ResponseCode.INVALID_REQUEST, remark=str(exc))
        try:
            self.runner.transfer_leadership(target)
        except NotLeaderError as err:
            return _not_leader(cmd, err)
        return cmd.response()
