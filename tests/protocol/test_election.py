"""The group view (mqcluster.protocol.election): one Election for the operator and the
broker's preStop hook, built from the controller's SyncStateSet table."""

from __future__ import annotations

from typing import Any

from mqcluster.broker import prestop
from mqcluster.protocol.controller import BrokerReplicasInfo, ReplicaIdentity, ReplicasInfo
from mqcluster.protocol.election import Election, ReplicaState, election_of

INFO = ReplicasInfo(
    master_broker_id=1, master_address="10.0.0.1:10911", master_epoch=4,
    sync_state_set_epoch=7,
    in_sync_replicas=[ReplicaIdentity("b", 1, "10.0.0.1:10911", True),
                      ReplicaIdentity("b", 2, "10.0.0.2:10911", True)],
    not_in_sync_replicas=[ReplicaIdentity("b", 3, "10.0.0.3:10911", False)],
)


def test_a_known_group() -> None:
    assert election_of(INFO, "127.0.0.5:9878") == Election(
        "10.0.0.1:10911", 4, 7,
        (ReplicaState(1, "10.0.0.1:10911", True, True),
         ReplicaState(2, "10.0.0.2:10911", True, True),
         ReplicaState(3, "10.0.0.3:10911", False, False)),
        "127.0.0.5:9878")


def test_an_unknown_group_or_no_master_has_no_master() -> None:
    assert election_of(None, "a:1") == Election(None, active_controller="a:1")
    no_master = ReplicasInfo(None, "", 0, 0)
    assert election_of(no_master).master_address is None


class _Controller:
    async def get_sync_state_data(self, names: list[str]) -> BrokerReplicasInfo:
        return BrokerReplicasInfo({"b": INFO})


async def test_the_prestop_hook_reads_the_same_view() -> None:
    client: Any = _Controller()
    view = await prestop.election(client, "b")
    assert view == election_of(INFO)
    assert prestop.successor(view.master_address, "10.0.0.1:10911", view.replicas) == 2
