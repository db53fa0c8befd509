"""DLedger mode's requests (``enableDLegerCommitLog=true``) beyond the Raft messages:
a replica's addresses, its Raft status, and a leadership transfer. Bodies are JSON.

Every answer is checked before it is used: a malformed one is a ValueError naming the
request, which callers retry or report.
"""

from __future__ import annotations

import json
from enum import IntEnum
from typing import Any

from mqcluster.wire.frame import RemotingCommand


class DLedgerRequestCode(IntEnum):
    BROKER_ADDRESSES = 1101
    """Asked on a peer's Raft address: the broker and gRPC addresses of that replica, and
    the newest entry layout it reads (``entryVersion``, absent before version 3)."""
    DLEDGER_STATUS = 1102
    """Asked on a broker's address: its Raft term, role, commit index and ledger end."""
    DLEDGER_TRANSFER_LEADERSHIP = 1103
    """Asked on the leader's broker address, ext ``peerId``: hand leadership to that peer
    (once it has caught up; writes are refused meanwhile)."""


OLDEST_ENTRY_VERSION = 2
"""What a replica that names no ``entryVersion`` reads (releases before version 3)."""


def addresses_request() -> RemotingCommand:
    return RemotingCommand.request(DLedgerRequestCode.BROKER_ADDRESSES)


def status_request() -> RemotingCommand:
    return RemotingCommand.request(DLedgerRequestCode.DLEDGER_STATUS)


def transfer_request(peer_id: str) -> RemotingCommand:
    return RemotingCommand.request(DLedgerRequestCode.DLEDGER_TRANSFER_LEADERSHIP,
                                   {"peerId": peer_id})


def encode_addresses(broker: str | None, grpc: str | None, entry_version: int) -> bytes:
    return json.dumps({"broker": broker, "grpc": grpc, "entryVersion": entry_version}).encode()


def decode_addresses(body: bytes | None) -> dict[str, Any]:
    """A peer's answer to BROKER_ADDRESSES: ``broker``/``grpc`` strings (or absent) and
    ``entryVersion`` an int; ValueError for anything else."""
    try:
        doc = json.loads(body or b"{}")
    except RecursionError:
        raise ValueError("BROKER_ADDRESSES answer nested too deep") from None
    if not isinstance(doc, dict):
        raise ValueError("BROKER_ADDRESSES answer is not a JSON object")
    for key in ("broker", "grpc"):
        if doc.get(key) is not None and (not isinstance(doc[key], str) or len(doc[key]) > 255):
            raise ValueError(f"BROKER_ADDRESSES answer: {key} is not an address")
    version = doc.get("entryVersion", OLDEST_ENTRY_VERSION)
    if type(version) is not int:
        raise ValueError("BROKER_ADDRESSES answer: entryVersion is not an integer")
    return doc


def decode_status(body: bytes | None) -> dict[str, Any] | None:
    """A replica's answer to DLEDGER_STATUS (peer id, role, term, indexes); None when it
    is not a JSON object."""
    data = json.loads(body or b"{}")
    return data if isinstance(data, dict) else None
