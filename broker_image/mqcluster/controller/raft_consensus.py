"""Consensus over the DLedger-style Raft runner (``mqcluster.raft.node``).

The runner shares the controller's HandlerRegistry, so Raft messages and
controller requests arrive on the same address (the controller's entry in
``controllerDLegerPeers``), as RocketMQ's DLedger controller reuses its
DLedger remoting server.
"""

from __future__ import annotations

from typing import Any

from mqcluster.controller.config import ControllerConfig
from mqcluster.controller.consensus import ConsensusError, NotLeader
from mqcluster.controller.replicated import ControllerStateMachine
from mqcluster.raft.node import ProposalError, RaftRunner, RunnerOptions
from mqcluster.raft.types import NotLeaderError, RaftConfig
from mqcluster.wire.rpc import HandlerRegistry


class RaftConsensus:
    def __init__(
        self,
        config: ControllerConfig,
        state_machine: ControllerStateMachine,
        registry: HandlerRegistry,
        raft_config: RaftConfig | None = None,
    ) -> None:
        self.runner = RaftRunner(
            config.controllerDLegerSelfId,
            config.peers,
            config.store_dir,
            state_machine,
            raft_config or RaftConfig(),
            registry=registry,
            options=RunnerOptions(
                snapshot_every=config.snapshotThreshold,
                propose_timeout=config.controllerRequestTimeoutMills / 1000,
            ),
        )
        self._started = False

    async def start(self) -> None:
        await self.runner.start()
        self._started = True

    async def stop(self) -> None:
        if self._started:
            await self.runner.stop()

    async def propose(self, data: bytes) -> Any:
        try:
            return await self.runner.propose(data)
        except NotLeaderError as exc:
            raise NotLeader(exc.leader_id) from None
        except ProposalError as exc:
            if not self.runner.is_leader:
                raise NotLeader(self.leader_id()) from None
            raise ConsensusError(str(exc)) from None

    def is_leader(self) -> bool:
        return self._started and self.runner.is_leader

    def leader_id(self) -> str | None:
        return self.runner.node.leader_id if self._started else None

    def term(self) -> int:
        return self.runner.node.term if self._started else 0

    def role(self) -> str:
        return self.runner.node.role.value if self._started else "FOLLOWER"
