"""Pure helpers for controller tests: build states by running the manager and applying."""

from __future__ import annotations

from mqcluster.controller.elect_policy import Candidate
from mqcluster.controller.heartbeat import StaticLiveness
from mqcluster.controller.manager import ControllerResult, ReplicasInfoManager
from mqcluster.controller.statemachine import ControllerState
from mqcluster.protocol.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    ElectMasterRequestHeader,
    RegisterBrokerToControllerRequestHeader,
    SyncStateSetBody,
)

CLUSTER = "c1"
GROUP = "broker-a"


def addr(broker_id: int) -> str:
    return f"10.0.0.{broker_id}:10911"


def code(broker_id: int, address: str | None = None) -> str:
    return f"{address or addr(broker_id)};identity-{broker_id}"


def run(state: ControllerState, result: ControllerResult) -> ControllerResult:
    """Apply a successful result's events, as every controller would after Raft."""
    if result.ok:
        state.apply_all(result.events)
    return result


def alive(*ids: int, group: str = GROUP, **cands: Candidate) -> StaticLiveness:
    table = {i: Candidate(i) for i in ids}
    for c in cands.values():
        table[c.broker_id] = c
    return StaticLiveness({group: table})


def group_with(
    n: int, *, unclean: bool = False, in_sync: set[int] | None = None
) -> tuple[ControllerState, ReplicasInfoManager]:
    """``n`` replicas with ids 1..n; broker 1 elected first; SyncStateSet = ``in_sync``."""
    state = ControllerState()
    mgr = ReplicasInfoManager(state, enable_elect_unclean_master=unclean)
    everyone = alive(*range(1, n + 1))
    for i in range(1, n + 1):
        r = run(state, mgr.apply_broker_id(ApplyBrokerIdRequestHeader(
            cluster_name=CLUSTER, broker_name=GROUP, applied_broker_id=i,
            register_check_code=code(i))))
        assert r.ok, r.remark
        r = run(state, mgr.register_broker(
            RegisterBrokerToControllerRequestHeader(
                cluster_name=CLUSTER, broker_name=GROUP, broker_id=i, broker_address=addr(i)),
                everyone
        ))
        assert r.ok, r.remark
    r = run(state, mgr.elect_master(ElectMasterRequestHeader(
        cluster_name=CLUSTER, broker_name=GROUP, broker_id=1), everyone))
    assert r.ok, r.remark
    members = in_sync if in_sync is not None else set(range(1, n + 1))
    if members != {1}:
        sync = state.sync_state(GROUP)
        assert sync is not None
        r = run(state, mgr.alter_sync_state_set(
            AlterSyncStateSetRequestHeader(
                broker_name=GROUP, master_broker_id=1, master_epoch=sync.master_epoch),
            SyncStateSetBody(members, sync.sync_state_set_epoch),
            everyone,
        ))
        assert r.ok, r.remark
    return state, mgr
