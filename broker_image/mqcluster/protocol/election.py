"""The group view: who is master of one broker group and which replicas are in its
SyncStateSet, as the controller's CONTROLLER_GET_SYNC_STATE_DATA answer says (RIP-44).

The operator follows it (relabels pods, reports status); the broker's preStop hook
hands over from it. ``election_of`` is the one translation from the controller's table.
"""

from __future__ import annotations

from dataclasses import dataclass

from mqcluster.protocol.controller import ReplicasInfo


@dataclass(frozen=True)
class ReplicaState:
    broker_id: int | None
    address: str
    alive: bool = True
    in_sync: bool = False


@dataclass(frozen=True)
class Election:
    """What the cluster says about one broker group."""

    master_address: str | None
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None
    replicas: tuple[ReplicaState, ...] = ()
    active_controller: str | None = None


def election_of(info: ReplicasInfo | None, active_controller: str | None = None) -> Election:
    """One group's entry of the controller's SyncStateSet table (None: the controller
    does not know the group, so it has no master)."""
    if info is None:
        return Election(None, active_controller=active_controller)
    groups = ((info.in_sync_replicas, True), (info.not_in_sync_replicas, False))
    replicas = tuple(
        ReplicaState(r.broker_id, r.broker_address, r.alive, in_sync)
        for group, in_sync in groups
        for r in group
    )
    return Election(info.master_address or None, info.master_epoch,
                    info.sync_state_set_epoch, replicas, active_controller)
