"""Asking DLedger-mode replicas (``mqcluster.protocol.dledger``): where a peer serves,
a replica's Raft status, a leadership transfer."""

from __future__ import annotations

from typing import Any

from mqcluster.protocol.dledger import (
    addresses_request,
    decode_addresses,
    decode_status,
    status_request,
)
from mqcluster.wire.rpc import RpcClient, RpcError


class DLedgerClient:
    def __init__(self, rpc: RpcClient | None = None, connect_timeout: float = 1.0) -> None:
        self.rpc = rpc or RpcClient(connect_timeout=connect_timeout)

    async def close(self) -> None:
        await self.rpc.close()

    async def addresses(self, raft_addr: str, timeout: float = 1.0) -> dict[str, Any]:
        """The broker and gRPC addresses and the entry version of the replica whose Raft
        address this is; RpcError when it does not answer, ValueError for a bad answer."""
        resp = await self.rpc.invoke(raft_addr, addresses_request(), timeout)
        return decode_addresses(resp.body)

    async def status(self, addr: str, timeout: float = 1.0) -> dict[str, Any] | None:
        return await read_status(self.rpc, addr, timeout)


async def read_status(rpc: RpcClient, addr: str, timeout: float = 1.0) -> dict[str, Any] | None:
    """A replica's answer to DLEDGER_STATUS (peer id, role, term, indexes), or None when it
    does not answer."""
    try:
        resp = await rpc.invoke(addr, status_request(), timeout)
    except (RpcError, OSError, TimeoutError):
        return None
    return decode_status(resp.body)
