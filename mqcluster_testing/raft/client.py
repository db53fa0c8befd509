"""A client of ``mqraft`` members for tests and benches: propose (following leader
redirects), status, read."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

from mqcluster.raft.codec import pack_values
from mqcluster.raft.codes import RaftRequestCode, RaftResponseCode
from mqcluster.raft.node import parse_peers
from mqcluster.wire.frame import RemotingCommand, ResponseCode
from mqcluster.wire.rpc import RpcClient, RpcError


class ProposeError(Exception):
    """The group did not accept the values (no leader within the deadline, or refused)."""


class ProposeOutcomeUnknownError(ProposeError):
    """The request reached a leader but its answer was lost: the values may be committed."""


class RaftClient:
    def __init__(self, peers: dict[str, str], *, timeout: float = 3.0) -> None:
        self.peers = dict(peers)
        self.timeout = timeout
        self.leader: str | None = None
        self._rpc = RpcClient(connect_timeout=0.5)

    async def close(self) -> None:
        await self._rpc.close()

    async def _call(self, node_id: str, cmd: RemotingCommand) -> RemotingCommand:
        return await self._rpc.invoke(self.peers[node_id], cmd, self.timeout)

    async def status(self, node_id: str) -> dict[str, Any] | None:
        """The member's status, or None if it does not answer."""
        try:
            resp = await self._call(node_id, RemotingCommand.request(RaftRequestCode.CLIENT_STATUS))
        except RpcError:
            return None
        doc: dict[str, Any] = json.loads(resp.body)
        return doc

    async def statuses(self) -> dict[str, dict[str, Any] | None]:
        ids = list(self.peers)
        docs = await asyncio.gather(*(self.status(n) for n in ids))
        return dict(zip(ids, docs, strict=True))

    async def wait_leader(
        self, timeout: float = 10.0, exclude: Iterable[str] = (), poll: float = 0.02
    ) -> str:
        """Id of a member that reports itself leader and is not in ``exclude``."""
        skip = set(exclude)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for node_id, doc in (await self.statuses()).items():
                if doc is not None and doc["role"] == "LEADER" and node_id not in skip:
                    self.leader = node_id
                    return node_id
            await asyncio.sleep(poll)
        raise TimeoutError(f"no leader among {sorted(set(self.peers) - skip)} in {timeout} s")

    async def propose(self, values: Sequence[bytes], deadline: float = 10.0) -> tuple[int, int]:
        """Replicate ``values``; returns the positions (first, last) they got.

        Retries on other members while no request reached a leader; raises
        ProposeOutcomeUnknownError if a leader took it but the answer was lost."""
        cmd_body = pack_values(values)
        end = time.monotonic() + deadline
        candidates: list[str] = []
        while time.monotonic() < end:
            if not candidates:
                candidates = ([self.leader] if self.leader else []) + [
                    n for n in self.peers if n != self.leader
                ]
            node_id = candidates.pop(0)
            try:
                conn = await self._rpc.connection(self.peers[node_id])
            except RpcError:
                if self.leader == node_id:
                    self.leader = None
                await asyncio.sleep(0.01)
                continue
            cmd = RemotingCommand.request(RaftRequestCode.CLIENT_PROPOSE, body=cmd_body)
            try:
                resp = await conn.invoke(cmd, self.timeout)
            except RpcError as exc:
                self.leader = None
                raise ProposeOutcomeUnknownError(f"{node_id}: {exc}") from exc
            if resp.code == ResponseCode.SUCCESS:
                self.leader = node_id
                return int(resp.ext_fields["first"]), int(resp.ext_fields["last"])
            if resp.code == RaftResponseCode.NOT_LEADER:
                hint = resp.ext_fields.get("leaderId")
                self.leader = hint if hint in self.peers and hint != node_id else None
                if self.leader is not None:
                    candidates = [self.leader]
                else:
                    await asyncio.sleep(0.02)  # an election is under way
                continue
            if resp.code == RaftResponseCode.PROPOSAL_FAILED:
                raise ProposeOutcomeUnknownError(f"{node_id}: {resp.remark}")
            raise ProposeError(f"{node_id}: code {resp.code}: {resp.remark}")
        raise ProposeError(f"no leader accepted the proposal within {deadline} s")

    async def read(self, node_id: str, start: int = 1, limit: int = 1000) -> dict[str, Any]:
        cmd = RemotingCommand.request(
            RaftRequestCode.CLIENT_READ, {"start": start, "limit": limit}
        )
        doc: dict[str, Any] = json.loads((await self._call(node_id, cmd)).body)
        doc["values"] = [v.encode("latin-1") for v in doc["values"]]
        return doc

    async def transfer_leadership(self, node_id: str, target: str) -> None:
        code = RaftRequestCode.CLIENT_TRANSFER_LEADERSHIP
        cmd = RemotingCommand.request(code, {"target": target})
        resp = await self._call(node_id, cmd)
        if resp.code != ResponseCode.SUCCESS:
            raise ProposeError(f"{node_id}: transfer refused: {resp.remark}")


async def _cli(args: argparse.Namespace) -> int:
    client = RaftClient(parse_peers(args.peers))
    try:
        if args.command == "status":
            for node_id, doc in (await client.statuses()).items():
                if doc is None:
                    print(f"{node_id}: down")
                else:
                    print(f"{node_id}: {doc['role']} term {doc['term']} leader {doc['leader']} "
                          f"commit {doc['commitIndex']} applied {doc['appliedIndex']} "
                          f"values {doc['count']} digest {doc['digest']:08x}")
        elif args.command == "propose":
            first, last = await client.propose([v.encode() for v in args.values])
            print(f"committed at positions {first}..{last} (leader {client.leader})")
        else:
            leader = await client.wait_leader(timeout=5)
            doc = await client.read(leader, args.start, args.limit)
            for pos, value in enumerate(doc["values"], start=doc["start"]):
                print(f"{pos}: {value.decode('utf-8', 'replace')}")
    finally:
        await client.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m mqcluster_testing.raft.client --peers SPEC status|propose V...|read``."""
    p = argparse.ArgumentParser(prog="python -m mqcluster_testing.raft.client")
    p.add_argument("--peers", required=True, help='"n0-host:port;n1-host:port;..."')
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("status", help="role, term, leader and progress of every member")
    propose = sub.add_parser("propose", help="replicate values (UTF-8 strings)")
    propose.add_argument("values", nargs="+")
    read = sub.add_parser("read", help="values kept by the leader's state machine")
    read.add_argument("--start", type=int, default=1)
    read.add_argument("--limit", type=int, default=100)
    return asyncio.run(_cli(p.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
