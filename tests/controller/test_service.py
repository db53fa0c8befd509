"""ControllerService over real sockets with single-node consensus and an injected clock."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mqcluster.broker.broker_identity import identity_path, read_identity
from mqcluster.client.controller import ControllerClient, ControllerError
from mqcluster.controller.consensus import LocalConsensus
from mqcluster.controller.service import ControllerService
from mqcluster.controller.statemachine import ControllerState
from mqcluster.protocol.controller import (
    ControllerResponseCode as Code,
)
from mqcluster.protocol.controller import (
    RequestCode,
    active_from_remark,
    request,
)
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.rpc import RpcClient
from mqcluster_testing.controller.standin import StandInBroker

from .conftest import FakeClock

CLUSTER = "c1"
GROUP = "broker-a"

MakeService = Callable[..., ControllerService]


def master_of(state: ControllerState) -> int | None:
    s = state.sync_state(GROUP)
    return s.master_broker_id if s else None


async def started(make_service: MakeService, **kw: object) -> ControllerService:
    svc = make_service(**kw)
    await svc.start()
    return svc


def broker(svc: ControllerService, tmp: Path, name: str, **kw: object) -> StandInBroker:
    return StandInBroker(svc.self_addr, CLUSTER, GROUP, tmp / name, **kw)  # type: ignore[arg-type]


async def test_registration_assigns_ids_and_first_master(
    make_service: MakeService, tmp_path: Path
) -> None:
    svc = await started(make_service)
    a, b = broker(svc, tmp_path, "a"), broker(svc, tmp_path, "b")
    try:
        ra = await a.start()
        rb = await b.start()
        assert (ra.broker_id, rb.broker_id) == (1, 2)
        assert ra.replica_info.master_broker_id == 1 and ra.replica_info.master_epoch == 1
        assert rb.replica_info.master_broker_id == 1
        assert rb.replica_info.master_address == a.addr
        rec = read_identity(identity_path(tmp_path / "b"))
        assert rec is not None and (rec.cluster_name, rec.broker_name, rec.broker_id) == (
            CLUSTER, GROUP, 2,
        )
    finally:
        await a.close()
        await b.close()


async def test_restart_with_new_address_keeps_id(
    make_service: MakeService, tmp_path: Path
) -> None:
    svc = await started(make_service)
    a = broker(svc, tmp_path, "a")
    b = broker(svc, tmp_path, "b", host="127.0.0.1")
    await a.start()
    await b.start()
    old_addr = b.addr
    await b.close()
    b2 = broker(svc, tmp_path, "b", host="127.0.0.3")
    try:
        reg = await b2.start()
        assert reg.broker_id == 2
        info = svc.state.replica(GROUP)
        assert info is not None and info.address_of(2) == b2.addr != old_addr
        # a third broker with a fresh store gets a new id, not 2
        c = broker(svc, tmp_path, "c")
        assert (await c.start()).broker_id == 3
        await c.close()
    finally:
        await a.close()
        await b2.close()


async def test_id_conflict_from_another_store_gets_a_new_id(
    make_service: MakeService, tmp_path: Path
) -> None:
    svc = await started(make_service)
    a = broker(svc, tmp_path, "a")
    await a.start()
    # a copied store claims id 1 with a different identity code
    (tmp_path / "x").mkdir()
    identity_path(tmp_path / "x").write_text(f"{CLUSTER}#{GROUP}#1#someone-else\n")
    x = broker(svc, tmp_path, "x")
    try:
        assert (await x.start()).broker_id == 2
        rec = read_identity(identity_path(tmp_path / "x"))
        assert rec is not None and rec.broker_id == 2 and rec.code != "someone-else"
    finally:
        await a.close()
        await x.close()


async def test_closed_master_connection_elects_from_sync_state_set_and_notifies(
    make_service: MakeService, tmp_path: Path, clock: FakeClock
) -> None:
    svc = await started(make_service)
    a, b, c = (broker(svc, tmp_path, n, epoch=1) for n in "abc")
    try:
        for x in (a, b, c):
            await x.start(heartbeat=False)
            await x.heartbeat_once()
        # the master puts b in its SyncStateSet
        info = await a.replica_info()
        await a.client.alter_sync_state_set(GROUP, 1, info.master_epoch, {1, 2}, 1)
        done = svc.elections_done
        await a.close()
        await svc.wait_for(lambda: svc.elections_done > done, timeout=5)
        assert master_of(svc.state) == 2
        sync = svc.state.sync_state(GROUP)
        assert sync is not None
        assert (sync.master_epoch, sync.sync_state_set) == (2, {2})
        # both survivors learn it by notification
        await b.notified.wait()
        await c.notified.wait()
        h, members = c.notifications[-1]
        assert (h.master_broker_id, h.master_address, h.master_epoch) == (2, b.addr, 2)
        assert members == {2}
        # and by polling
        polled = await c.replica_info()
        assert (polled.master_broker_id, polled.master_epoch) == (2, 2)
        record = svc.recent_elections[-1]
        assert (record.trigger, record.old_master, record.new_master) == ("channel_closed", 1, 2)
    finally:
        for x in (a, b, c):
            await x.close()


async def test_silent_master_elected_out_after_timeout(
    make_service: MakeService, tmp_path: Path, clock: FakeClock
) -> None:
    svc = await started(make_service)
    a, b = broker(svc, tmp_path, "a"), broker(svc, tmp_path, "b")
    try:
        for x in (a, b):
            await x.start(heartbeat=False)
            await x.heartbeat_once()
        await a.client.alter_sync_state_set(GROUP, 1, 1, {1, 2}, 1)
        clock.advance(1500)
        await b.heartbeat_once()
        await svc.scan_once()
        assert master_of(svc.state) == 1  # not yet timed out
        done = svc.elections_done
        clock.advance(600)
        await svc.scan_once()
        await svc.wait_for(lambda: svc.elections_done > done, timeout=5)
        assert master_of(svc.state) == 2
        assert svc.recent_elections[-1].trigger == "heartbeat_timeout"
    finally:
        await a.close()
        await b.close()


async def test_master_not_available_then_last_member_returns(
    make_service: MakeService, tmp_path: Path, clock: FakeClock
) -> None:
    svc = await started(make_service)
    a, b = broker(svc, tmp_path, "a"), broker(svc, tmp_path, "b")
    try:
        for x in (a, b):
            await x.start(heartbeat=False)
            await x.heartbeat_once()
        await a.client.alter_sync_state_set(GROUP, 1, 1, {1, 2}, 1)
        await b.close()  # the slave dies first
        await a.close()  # then the master: nobody eligible
        await svc.wait_until(
            lambda s: (x := s.sync_state(GROUP)) is not None and x.master_epoch == 2, timeout=5
        )
        sync = svc.state.sync_state(GROUP)
        assert sync is not None
        assert sync.master_broker_id is None and sync.sync_state_set == {1, 2}
        # b comes back (same store): it becomes master with the next epoch
        b2 = broker(svc, tmp_path, "b")
        reg = await b2.start(heartbeat=False)
        await b2.heartbeat_once()
        await svc.wait_until(lambda s: master_of(s) == 2, timeout=5)
        info = await b2.replica_info()
        assert (reg.broker_id, info.master_broker_id, info.master_epoch) == (2, 2, 3)
        await b2.close()
    finally:
        await a.close()
        await b.close()


async def test_admin_elect_and_sync_state_data(
    make_service: MakeService, tmp_path: Path
) -> None:
    svc = await started(make_service)
    a, b = broker(svc, tmp_path, "a"), broker(svc, tmp_path, "b")
    admin = ControllerClient([svc.self_addr])
    try:
        for x in (a, b):
            await x.start()
        await a.client.alter_sync_state_set(GROUP, 1, 1, {1, 2}, 1)
        header, body = await admin.elect_master(CLUSTER, GROUP, 2, designate=True)
        assert (header.master_broker_id, header.master_epoch) == (2, 2)
        assert body is not None and body.sync_state_set == {2}
        data = await admin.get_sync_state_data([GROUP])
        g = data.replicas_info_table[GROUP]
        assert g.master_broker_id == 2
        assert [r.broker_id for r in g.in_sync_replicas] == [2]
        assert [(r.broker_id, r.alive) for r in g.not_in_sync_replicas] == [(1, True)]
        with pytest.raises(ControllerError) as err:
            await admin.elect_master(CLUSTER, GROUP, 2, designate=True)
        assert err.value.code == Code.CONTROLLER_MASTER_STILL_EXIST
    finally:
        await admin.close()
        await a.close()
        await b.close()


async def test_follower_answers_metadata_and_refuses_writes(
    make_service: MakeService, tmp_path: Path
) -> None:
    svc = await started(make_service)
    consensus = svc.consensus
    assert isinstance(consensus, LocalConsensus)
    consensus.leader = False
    rpc = RpcClient()
    try:
        meta = await ControllerClient([svc.self_addr], rpc=rpc).get_metadata(svc.self_addr)
        assert meta.is_leader is False and meta.group == svc.config.controllerDLegerGroup
        resp = await rpc.invoke(
            svc.self_addr,
            request(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID).__class__(
                code=RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                ext_fields={"clusterName": CLUSTER, "brokerName": GROUP},
            ),
        )
        assert resp.code == Code.CONTROLLER_NOT_LEADER
        assert resp.remark is not None
        assert resp.remark.startswith("not active, active controller is")
        assert active_from_remark(resp.remark) is None
    finally:
        await rpc.close()


async def test_bad_input_gets_errors_and_service_continues(
    make_service: MakeService, tmp_path: Path
) -> None:
    svc = await started(make_service)
    rpc = RpcClient()
    addr = svc.self_addr

    async def call(code: int, ext: dict[str, str] | None = None, body: bytes = b"") -> int:
        resp = await rpc.invoke(addr, RemotingCommand(code=code, ext_fields=ext or {}, body=body))
        return resp.code

    try:
        assert await call(4242) == Code.REQUEST_CODE_NOT_SUPPORTED
        bad = Code.CONTROLLER_INVALID_REQUEST
        assert await call(RequestCode.CONTROLLER_GET_REPLICA_INFO) == bad
        assert await call(
            RequestCode.CONTROLLER_APPLY_BROKER_ID,
            {"clusterName": CLUSTER, "brokerName": GROUP, "appliedBrokerId": "one",
             "registerCheckCode": "x;y"},
        ) == Code.CONTROLLER_INVALID_REQUEST
        assert await call(
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
            {"brokerName": GROUP, "masterBrokerId": "1", "masterEpoch": "1"},
            b"{not json",
        ) == Code.CONTROLLER_INVALID_REQUEST
        assert await call(
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
            {"brokerName": GROUP, "masterBrokerId": "1", "masterEpoch": "1"},
            b'{"syncStateSet": "nope"}',
        ) == Code.CONTROLLER_INVALID_REQUEST
        assert await call(
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=b'{"a": 1}'
        ) == Code.CONTROLLER_INVALID_REQUEST
        assert await call(
            RequestCode.BROKER_HEARTBEAT, {"brokerName": GROUP}
        ) == Code.CONTROLLER_INVALID_REQUEST
        # unknown groups
        assert await call(
            RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": "nope"}
        ) == Code.CONTROLLER_BROKER_METADATA_NOT_EXIST
        assert await call(
            RequestCode.CONTROLLER_ELECT_MASTER, {"clusterName": CLUSTER, "brokerName": "nope"}
        ) == Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
        assert await call(
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
            {"brokerName": "nope", "masterBrokerId": "1", "masterEpoch": "1"},
            b'{"syncStateSet": [1], "syncStateSetEpoch": 1}',
        ) == Code.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
        assert await call(
            RequestCode.CONTROLLER_REGISTER_BROKER,
            {"clusterName": CLUSTER, "brokerName": "nope", "brokerId": "1",
             "brokerAddress": "1.2.3.4:5"},
        ) == Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
        assert await call(
            RequestCode.CLEAN_BROKER_DATA, {"brokerName": "nope"}
        ) == Code.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
        # still serving
        assert await call(RequestCode.CONTROLLER_GET_METADATA_INFO) == Code.SUCCESS
        a = broker(svc, tmp_path, "a")
        assert (await a.start()).broker_id == 1
        await a.close()
        text = svc.metrics.exposition().decode()
        assert 'result="CONTROLLER_INVALID_REQUEST"' in text
    finally:
        await rpc.close()
