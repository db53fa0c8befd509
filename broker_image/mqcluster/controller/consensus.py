"""What the controller needs from consensus, and a single-node implementation for tests.

``Consensus.propose(data)`` returns once the entry is committed and applied
to the local state machine, and raises ``NotLeaderError`` on a follower.
The Raft-backed implementation is ``raft_consensus.RaftConsensus``.
"""

from __future__ import annotations

from typing import Any, Protocol

from mqcluster.controller.replicated import ControllerStateMachine


class NotLeader(Exception):
    """Raised by ``propose`` when this node is not the leader."""

    def __init__(self, leader_id: str | None) -> None:
        super().__init__(f"not the leader; leader is {leader_id!r}")
        self.leader_id = leader_id


class ConsensusError(Exception):
    """A proposal was accepted but will not be applied as proposed (lost leadership...)."""


class Consensus(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def propose(self, data: bytes) -> Any: ...

    def is_leader(self) -> bool: ...

    def leader_id(self) -> str | None: ...

    def term(self) -> int: ...


class LocalConsensus:
    """One node, always leader, entries applied at once; nothing persisted."""

    def __init__(self, node_id: str, state_machine: ControllerStateMachine) -> None:
        self.node_id = node_id
        self.sm = state_machine
        self.leader = True
        self.current_term = 1

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def propose(self, data: bytes) -> Any:
        if not self.leader:
            raise NotLeader(None)
        return self.sm.apply(data)

    def is_leader(self) -> bool:
        return self.leader

    def leader_id(self) -> str | None:
        return self.node_id if self.leader else None

    def term(self) -> int:
        return self.current_term
