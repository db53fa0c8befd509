"""RIP-44 rules of the pure manager + state machine: ids, elections, SyncStateSet, cleaning."""

from __future__ import annotations

from mqcluster.controller.elect_policy import Candidate
from mqcluster.controller.events import ElectMasterEvent
from mqcluster.controller.heartbeat import StaticLiveness
from mqcluster.controller.manager import ControllerResult, ReplicasInfoManager
from mqcluster.controller.statemachine import ControllerState, SyncStateInfo
from mqcluster.protocol.controller import (
    AlterSyncStateSetRequestHeader,
    AlterSyncStateSetResponseHeader,
    ApplyBrokerIdRequestHeader,
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseBody,
    ElectMasterResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader,
    GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
    SyncStateSetBody,
)
from mqcluster.protocol.controller import ControllerResponseCode as Code

from .helpers import CLUSTER, GROUP, addr, alive, code, group_with, run


def sync_of(state: ControllerState) -> SyncStateInfo:
    s = state.sync_state(GROUP)
    assert s is not None
    return s


def controller_elect(mgr: ReplicasInfoManager, liveness: StaticLiveness) -> ControllerResult:
    return mgr.elect_master(ElectMasterRequestHeader(
        cluster_name=CLUSTER, broker_name=GROUP, broker_id=None), liveness)


# ---------------------------------------------------------------- broker ids


def test_next_broker_id_starts_at_one_and_follows_applied_ids() -> None:
    state = ControllerState()
    mgr = ReplicasInfoManager(state)
    nxt = mgr.get_next_broker_id(GetNextBrokerIdRequestHeader(
        cluster_name=CLUSTER, broker_name=GROUP)).header
    assert isinstance(nxt, GetNextBrokerIdResponseHeader) and nxt.next_broker_id == 1
    run(state, mgr.apply_broker_id(ApplyBrokerIdRequestHeader(
        cluster_name=CLUSTER, broker_name=GROUP, applied_broker_id=1, register_check_code=code(1))))
    run(state, mgr.apply_broker_id(ApplyBrokerIdRequestHeader(
        cluster_name=CLUSTER, broker_name=GROUP, applied_broker_id=2, register_check_code=code(2))))
    nxt = mgr.get_next_broker_id(GetNextBrokerIdRequestHeader(
        cluster_name=CLUSTER, broker_name=GROUP)).header
    assert isinstance(nxt, GetNextBrokerIdResponseHeader) and nxt.next_broker_id == 3
    info = state.replica(GROUP)
    assert info is not None
    assert info.broker_id_table() == {addr(1): 1, addr(2): 2}


def test_first_id_of_an_unknown_group_must_be_one() -> None:
    mgr = ReplicasInfoManager(ControllerState())
    r = mgr.apply_broker_id(ApplyBrokerIdRequestHeader(
        cluster_name=CLUSTER, broker_name=GROUP, applied_broker_id=5, register_check_code=code(5)))
    assert r.code == Code.CONTROLLER_BROKER_ID_INVALID and not r.events


def test_apply_broker_id_is_idempotent_for_the_same_identity() -> None:
    state = ControllerState()
    mgr = ReplicasInfoManager(state)
    run(state, mgr.apply_broker_id(ApplyBrokerIdRequestHeader(
        cluster_name=CLUSTER, broker_name=GROUP, applied_broker_id=1, register_check_code=code(1))))
    before = state.snapshot()
    again = mgr.apply_broker_id(ApplyBrokerIdRequestHeader(
        cluster_name=CLUSTER, broker_name=GROUP, applied_broker_id=1, register_check_code=code(1)))
    assert again.ok and not again.events
    # replaying the event itself changes nothing either
    first = ReplicasInfoManager(ControllerState()).apply_broker_id(
        ApplyBrokerIdRequestHeader(
            cluster_name=CLUSTER, broker_name=GROUP, applied_broker_id=1,
            register_check_code=code(1))
    )
    state.apply_all(first.events)
    assert state.replica_info_table == ControllerState.from_snapshot(before).replica_info_table


def test_id_held_by_another_identity_is_refused() -> None:
    state = ControllerState()
    mgr = ReplicasInfoManager(state)
    run(state, mgr.apply_broker_id(ApplyBrokerIdRequestHeader(
        cluster_name=CLUSTER, broker_name=GROUP, applied_broker_id=1, register_check_code=code(1))))
    thief = f"{addr(9)};identity-other"
    r = mgr.apply_broker_id(ApplyBrokerIdRequestHeader(
        cluster_name=CLUSTER, broker_name=GROUP, applied_broker_id=1, register_check_code=thief))
    assert r.code == Code.CONTROLLER_BROKER_ID_INVALID
    # even if such an event reached the log, the holder keeps the id
    from mqcluster.controller.events import ApplyBrokerIdEvent

    state.apply(ApplyBrokerIdEvent(CLUSTER, GROUP, addr(9), 1, thief))
    info = state.replica(GROUP)
    assert info is not None and info.address_of(1) == addr(1)


def test_restarted_broker_with_new_address_keeps_its_id() -> None:
    state, mgr = group_with(2)
    new_addr = "10.9.9.9:10911"
    # re-apply with the same identity from the new address: accepted, address recorded
    r = run(state, mgr.apply_broker_id(
        ApplyBrokerIdRequestHeader(
            cluster_name=CLUSTER, broker_name=GROUP, applied_broker_id=2,
            register_check_code=code(2, new_addr))
    ))
    assert r.ok and r.events
    info = state.replica(GROUP)
    assert info is not None and info.address_of(2) == new_addr and info.id_of(addr(2)) is None
    # registering from yet another address records that change too
    newer = "10.9.9.10:10911"
    r = run(state, mgr.register_broker(
        RegisterBrokerToControllerRequestHeader(
            cluster_name=CLUSTER, broker_name=GROUP, broker_id=2, broker_address=newer), alive(1, 2)
    ))
    assert r.ok and r.events
    assert info.address_of(2) == newer
    nxt = mgr.get_next_broker_id(GetNextBrokerIdRequestHeader(
        cluster_name=CLUSTER, broker_name=GROUP)).header
    assert isinstance(nxt, GetNextBrokerIdResponseHeader) and nxt.next_broker_id == 3


def test_register_unknown_broker_needs_registration() -> None:
    _state, mgr = group_with(1)
    r = mgr.register_broker(
        RegisterBrokerToControllerRequestHeader(
            cluster_name=CLUSTER, broker_name=GROUP, broker_id=7, broker_address=addr(7)), alive(1)
    )
    assert r.code == Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    r = mgr.register_broker(
        RegisterBrokerToControllerRequestHeader(
            cluster_name=CLUSTER, broker_name="nope", broker_id=1, broker_address=addr(1)), alive(1)
    )
    assert r.code == Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED


def test_register_returns_alive_master_and_sync_state_set() -> None:
    _state, mgr = group_with(3)
    r = mgr.register_broker(
        RegisterBrokerToControllerRequestHeader(
            cluster_name=CLUSTER, broker_name=GROUP, broker_id=2, broker_address=addr(2)),
            alive(1, 2, 3)
    )
    h = r.header
    assert isinstance(h, RegisterBrokerToControllerResponseHeader)
    assert (h.master_broker_id, h.master_address, h.master_epoch) == (1, addr(1), 1)
    assert SyncStateSetBody.decode(r.body).sync_state_set == {1, 2, 3}
    # master dead: no master in the answer
    r = mgr.register_broker(
        RegisterBrokerToControllerRequestHeader(
            cluster_name=CLUSTER, broker_name=GROUP, broker_id=2, broker_address=addr(2)),
            alive(2, 3)
    )
    h = r.header
    assert isinstance(h, RegisterBrokerToControllerResponseHeader)
    assert h.master_broker_id is None


# ---------------------------------------------------------------- elections


def test_first_election_the_requester_becomes_master() -> None:
    state, _mgr = group_with(1)
    s = sync_of(state)
    assert (s.master_broker_id, s.master_epoch, s.sync_state_set, s.sync_state_set_epoch) == (
        1, 1, {1}, 1,
    )


def test_first_election_requester_wins_even_if_others_rank_higher() -> None:
    state = ControllerState()
    mgr = ReplicasInfoManager(state)
    for i in (1, 2):
        run(state, mgr.apply_broker_id(ApplyBrokerIdRequestHeader(
            cluster_name=CLUSTER, broker_name=GROUP, applied_broker_id=i,
            register_check_code=code(i))))
    r = run(state, mgr.elect_master(
        ElectMasterRequestHeader(cluster_name=CLUSTER, broker_name=GROUP, broker_id=2),
        alive(1, 2, a=Candidate(1, epoch=9, max_offset=9)),
    ))
    assert r.ok and sync_of(state).master_broker_id == 2


def test_alive_old_master_is_kept() -> None:
    _state, mgr = group_with(3)
    r = controller_elect(mgr, alive(1, 2, 3))
    assert r.code == Code.CONTROLLER_MASTER_STILL_EXIST and not r.events
    h = r.header
    assert isinstance(h, ElectMasterResponseHeader) and h.master_broker_id == 1


def test_dead_master_new_master_from_sync_state_set() -> None:
    state, mgr = group_with(3, in_sync={1, 2})
    before = sync_of(state)
    epoch, sse = before.master_epoch, before.sync_state_set_epoch
    r = run(state, controller_elect(mgr, alive(2, 3)))
    assert r.ok
    s = sync_of(state)
    assert s.master_broker_id == 2  # 3 is alive but not in the SyncStateSet
    assert s.master_epoch == epoch + 1
    assert s.sync_state_set == {2} and s.sync_state_set_epoch == sse + 1
    h = r.header
    assert isinstance(h, ElectMasterResponseHeader)
    assert (h.master_broker_id, h.master_address, h.master_epoch) == (2, addr(2), epoch + 1)
    body = ElectMasterResponseBody.decode(r.body)
    assert body.sync_state_set == {2}
    assert body.broker_member_group is not None
    assert body.broker_member_group.broker_addrs[3] == addr(3)


def test_ranking_by_epoch_then_offset_then_priority() -> None:
    cases = [
        # (candidates, expected)
        ([Candidate(2, epoch=3, max_offset=10), Candidate(3, epoch=4, max_offset=1)], 3),
        ([Candidate(2, epoch=4, max_offset=10), Candidate(3, epoch=4, max_offset=2**40)], 3),
        (
            [
                Candidate(2, epoch=4, max_offset=10, election_priority=5),
                Candidate(3, epoch=4, max_offset=10, election_priority=1),
            ],
            3,
        ),
        ([Candidate(2, epoch=4, max_offset=10), Candidate(3, epoch=4, max_offset=10)], 2),
    ]
    for cands, expected in cases:
        state, mgr = group_with(3)
        liveness = StaticLiveness({GROUP: {c.broker_id: c for c in cands}})
        r = run(state, controller_elect(mgr, liveness))
        assert r.ok and sync_of(state).master_broker_id == expected, cands


def test_offsets_compare_as_integers_not_strings() -> None:
    state, mgr = group_with(3)
    liveness = StaticLiveness(
        {GROUP: {2: Candidate(2, 1, 9), 3: Candidate(3, 1, 10)}}
    )
    run(state, controller_elect(mgr, liveness))
    assert sync_of(state).master_broker_id == 3


def test_no_eligible_replica_clears_master_then_returning_member_wins() -> None:
    state, mgr = group_with(3, in_sync={1, 2})
    epoch = sync_of(state).master_epoch
    sse = sync_of(state).sync_state_set_epoch
    # master 1 died, 2 (in sync) is down too, only 3 (not in sync) alive
    r = run(state, controller_elect(mgr, alive(3)))
    assert r.code == Code.CONTROLLER_MASTER_NOT_AVAILABLE
    assert any(isinstance(e, ElectMasterEvent) for e in r.events)
    state.apply_all(r.events)  # the event is applied even though the answer is an error
    s = sync_of(state)
    assert s.master_broker_id is None and s.master_epoch == epoch + 1
    assert s.sync_state_set == {1, 2} and s.sync_state_set_epoch == sse
    # retried while still nobody is eligible: no new event, epoch stable
    r = controller_elect(mgr, alive(3))
    assert r.code == Code.CONTROLLER_MASTER_NOT_AVAILABLE and not r.events
    assert mgr.needs_election(GROUP, alive(3)) is False
    # a broker asking for itself outside the SyncStateSet fails without an event
    r = mgr.elect_master(ElectMasterRequestHeader(
        cluster_name=CLUSTER, broker_name=GROUP, broker_id=3), alive(3))
    assert r.code == Code.CONTROLLER_ELECT_MASTER_FAILED and not r.events
    # the last SyncStateSet member to return becomes master
    assert mgr.needs_election(GROUP, alive(2, 3)) is True
    r = run(state, controller_elect(mgr, alive(2, 3)))
    assert r.ok
    s = sync_of(state)
    assert s.master_broker_id == 2 and s.master_epoch == epoch + 2 and s.sync_state_set == {2}


def test_unclean_election_picks_any_alive_replica_when_enabled() -> None:
    state, mgr = group_with(3, unclean=True, in_sync={1, 2})
    r = run(state, controller_elect(mgr, alive(3)))
    assert r.ok and sync_of(state).master_broker_id == 3
    # disabled: same situation refuses
    state, mgr = group_with(3, unclean=False, in_sync={1, 2})
    r = controller_elect(mgr, alive(3))
    assert r.code == Code.CONTROLLER_MASTER_NOT_AVAILABLE


def test_unclean_prefers_sync_state_set_members() -> None:
    state, mgr = group_with(3, unclean=True, in_sync={1, 2})
    liveness = StaticLiveness({GROUP: {2: Candidate(2, 1, 1), 3: Candidate(3, 5, 999)}})
    run(state, controller_elect(mgr, liveness))
    assert sync_of(state).master_broker_id == 2


def test_admin_named_election() -> None:
    state, mgr = group_with(3)
    epoch = sync_of(state).master_epoch
    r = run(state, mgr.elect_master(
        ElectMasterRequestHeader(
            cluster_name=CLUSTER, broker_name=GROUP, broker_id=3, designate_elect=True),
            alive(1, 2, 3)
    ))
    assert r.ok
    s = sync_of(state)
    assert s.master_broker_id == 3 and s.master_epoch == epoch + 1
    # naming the current master changes nothing
    r = mgr.elect_master(
        ElectMasterRequestHeader(
            cluster_name=CLUSTER, broker_name=GROUP, broker_id=3, designate_elect=True),
            alive(1, 2, 3)
    )
    assert r.code == Code.CONTROLLER_MASTER_STILL_EXIST
    # naming a dead broker, or one outside the SyncStateSet, fails
    r = mgr.elect_master(
        ElectMasterRequestHeader(
            cluster_name=CLUSTER, broker_name=GROUP, broker_id=1, designate_elect=True), alive(2, 3)
    )
    assert r.code == Code.CONTROLLER_ELECT_MASTER_FAILED
    r = mgr.elect_master(
        ElectMasterRequestHeader(
            cluster_name=CLUSTER, broker_name=GROUP, broker_id=9, designate_elect=True), alive(2, 3)
    )
    assert r.code == Code.CONTROLLER_ELECT_MASTER_FAILED


def test_elect_unknown_group() -> None:
    mgr = ReplicasInfoManager(ControllerState())
    r = mgr.elect_master(ElectMasterRequestHeader(
        cluster_name=CLUSTER, broker_name="nope", broker_id=None), alive())
    assert r.code == Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED


# ---------------------------------------------------------------- AlterSyncStateSet


def alter(
    mgr: ReplicasInfoManager,
    members: set[int],
    *,
    state: ControllerState,
    master: int = 1,
    epoch: int | None = None,
    sse: int | None = None,
    liveness: StaticLiveness | None = None,
) -> ControllerResult:
    s = state.sync_state(GROUP)
    assert s is not None
    return mgr.alter_sync_state_set(
        AlterSyncStateSetRequestHeader(
            broker_name=GROUP, master_broker_id=master,
            master_epoch=s.master_epoch if epoch is None else epoch),
        SyncStateSetBody(set(members), s.sync_state_set_epoch if sse is None else sse),
        liveness or alive(1, 2, 3),
    )


def test_alter_sync_state_set_success() -> None:
    state, mgr = group_with(3, in_sync={1})
    sse = sync_of(state).sync_state_set_epoch
    r = run(state, alter(mgr, {1, 2}, state=state))
    assert r.ok
    h = r.header
    assert isinstance(h, AlterSyncStateSetResponseHeader) and h.new_sync_state_set_epoch == sse + 1
    assert sync_of(state).sync_state_set == {1, 2}
    assert SyncStateSetBody.decode(r.body) == SyncStateSetBody({1, 2}, sse + 1)


def test_alter_precheck_not_master() -> None:
    state, mgr = group_with(3)
    r = alter(mgr, {2, 1}, master=2, state=state)
    assert r.code == Code.CONTROLLER_INVALID_MASTER and not r.events


def test_alter_unchanged_set_is_checked_first_as_rocketmq_does() -> None:
    state, mgr = group_with(3)
    s = sync_of(state)
    r = alter(mgr, {2, 3, 1}, master=2, epoch=s.master_epoch - 1, state=state)
    assert r.code == Code.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED and not r.events
    assert "equals the current one" in r.remark


def test_alter_precheck_stale_epochs() -> None:
    state, mgr = group_with(3)
    s = sync_of(state)
    r = alter(mgr, {1, 2}, epoch=s.master_epoch - 1, state=state)
    assert r.code == Code.CONTROLLER_FENCED_MASTER_EPOCH
    r = alter(mgr, {1, 2}, sse=s.sync_state_set_epoch - 1, state=state)
    assert r.code == Code.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH


def test_alter_precheck_dead_or_unknown_member() -> None:
    state, mgr = group_with(3, in_sync={1})
    r = alter(mgr, {1, 3}, liveness=alive(1, 2), state=state)
    assert r.code == Code.CONTROLLER_BROKER_NOT_ALIVE
    r = alter(mgr, {1, 8}, state=state)
    assert r.code == Code.CONTROLLER_INVALID_REPLICAS


def test_alter_precheck_master_missing() -> None:
    state, mgr = group_with(3, in_sync={1})
    r = alter(mgr, {2, 3}, state=state)
    assert r.code == Code.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED


def test_alter_unknown_group() -> None:
    mgr = ReplicasInfoManager(ControllerState())
    r = mgr.alter_sync_state_set(
        AlterSyncStateSetRequestHeader(
            broker_name="nope", master_broker_id=1, master_epoch=1), SyncStateSetBody({1}, 1),
            alive()
    )
    assert r.code == Code.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED


def test_alter_after_reelection_is_fenced() -> None:
    state, mgr = group_with(3)
    old = sync_of(state)
    old_epoch, old_sse = old.master_epoch, old.sync_state_set_epoch
    run(state, controller_elect(mgr, alive(2, 3)))
    r = alter(mgr, {1, 2}, master=1, epoch=old_epoch, sse=old_sse, state=state)
    assert r.code == Code.CONTROLLER_INVALID_MASTER


# ---------------------------------------------------------------- reads and cleaning


def test_get_replica_info() -> None:
    _state, mgr = group_with(2)
    r = mgr.get_replica_info(GetReplicaInfoRequestHeader(broker_name=GROUP))
    h = r.header
    assert isinstance(h, GetReplicaInfoResponseHeader)
    assert (h.master_broker_id, h.master_address, h.master_epoch) == (1, addr(1), 1)
    r = mgr.get_replica_info(GetReplicaInfoRequestHeader(broker_name="nope"))
    assert r.code == Code.CONTROLLER_BROKER_METADATA_NOT_EXIST


def test_sync_state_data_marks_alive_and_in_sync() -> None:
    from mqcluster.protocol.controller import BrokerReplicasInfo

    _state, mgr = group_with(3, in_sync={1, 2})
    info = BrokerReplicasInfo.decode(
        mgr.get_sync_state_data([GROUP, "nope"], alive(1, 3)).body
    ).replicas_info_table
    assert set(info) == {GROUP}
    g = info[GROUP]
    assert [(r.broker_id, r.alive) for r in g.in_sync_replicas] == [(1, True), (2, False)]
    assert [(r.broker_id, r.alive) for r in g.not_in_sync_replicas] == [(3, True)]


def test_clean_broker_data() -> None:
    state, mgr = group_with(3, in_sync={1, 2})
    # alive brokers are protected unless isCleanLivingBroker
    r = mgr.clean_broker_data(CleanControllerBrokerDataRequestHeader(
        cluster_name=CLUSTER, broker_name=GROUP, broker_controller_ids_to_clean="2"), alive(2))
    assert r.code == Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    r = run(state, mgr.clean_broker_data(
        CleanControllerBrokerDataRequestHeader(
            cluster_name=CLUSTER, broker_name=GROUP, broker_controller_ids_to_clean="2",
            is_clean_living_broker=True), alive(2)
    ))
    assert r.ok
    info = state.replica(GROUP)
    assert info is not None and not info.is_broker_exist(2)
    assert sync_of(state).sync_state_set == {1}
    # the whole group
    r = run(state, mgr.clean_broker_data(
        CleanControllerBrokerDataRequestHeader(
            cluster_name=CLUSTER, broker_name=GROUP, broker_controller_ids_to_clean=None), alive()
    ))
    assert r.ok and not state.contains(GROUP)
    r = mgr.clean_broker_data(CleanControllerBrokerDataRequestHeader(
        cluster_name=CLUSTER, broker_name=GROUP, broker_controller_ids_to_clean=None), alive())
    assert r.code == Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA


def test_snapshot_round_trip() -> None:
    state, mgr = group_with(3, in_sync={1, 2})
    run(state, controller_elect(mgr, alive(2, 3)))
    data = state.snapshot()
    restored = ControllerState.from_snapshot(data)
    assert restored == state
    assert restored.snapshot() == data
    other = ControllerState()
    other.restore(data)
    assert other == state
    # the restored state keeps validating the same way
    r = ReplicasInfoManager(restored).get_next_broker_id(
        GetNextBrokerIdRequestHeader(cluster_name=CLUSTER, broker_name=GROUP)
    )
    assert isinstance(r.header, GetNextBrokerIdResponseHeader) and r.header.next_broker_id == 4
