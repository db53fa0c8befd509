"""The upgrade step of a BrokerGroup follower resumes from status alone: a follower
started afresh (an operator restart) mid-roll neither deletes a pod twice nor skips
the wait for the pod deleted last."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mqcluster.admin.commands import AdminError
from mqcluster.protocol.election import Election, ReplicaState
from mqcluster_operator import names
from mqcluster_operator.follow.daemon import BrokerGroupFollower
from mqcluster_operator.k8s import Ref

from .fakes import NS, FixedHub, Log, addr


def pod(ordinal: int, revision: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"g-{ordinal}", "namespace": NS, "uid": uid,
                     "labels": {names.LABEL_NAME: "mqcluster-broker", names.LABEL_INSTANCE: "g",
                                names.LABEL_COMPONENT: "broker",
                                "controller-revision-hash": revision}},
        "status": {"podIP": f"10.0.0.{ordinal + 1}",
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


class World:
    """The API as the follower sees it: a DLedger group mid-roll to revision r2."""

    def __init__(self, upgrade: dict[str, Any]) -> None:
        self.body: dict[str, Any] = {
            "apiVersion": names.API_VERSION, "kind": "BrokerGroup",
            "metadata": {"name": "g", "namespace": NS, "uid": "u", "generation": 1},
            "spec": {"mode": "DLedger", "replicas": 3},
            "status": {"upgrade": upgrade, "masterPod": "g-0"},
        }
        self.pods = {"g-0": pod(0, "r1", "a0"), "g-1": pod(1, "r2", "b1"),
                     "g-2": pod(2, "r1", "a2")}
        self.deleted: list[str] = []
        self.events: list[str] = []

    async def get(self, ref: Ref) -> dict[str, Any] | None:
        if ref.kind == "StatefulSet":
            return {"status": {"updateRevision": "r2"}}
        return self.body if ref.kind == "BrokerGroup" else None

    async def list(self, ref: Ref, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        return list(self.pods.values())

    async def patch(self, ref: Ref, body: Any, subresource: str | None = None) -> None:
        if ref.kind == "Pod":  # the follower's role labels
            self.pods[ref.name]["metadata"]["labels"].update(body["metadata"]["labels"])

    async def delete(self, ref: Ref) -> None:
        self.deleted.append(ref.name)
        del self.pods[ref.name]

    async def write_status(self, ref: Ref, status: Mapping[str, Any], writer: Any,
                           fields_first: bool = False) -> None:
        apply_merge_patch(self.body["status"],
                          {k: v for k, v in status.items() if k != "conditions"})

    async def post_event(self, event: dict[str, Any]) -> None:
        self.events.append(f"{event['type']}: {event['message']}")


def apply_merge_patch(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            apply_merge_patch(target[key], value)
        else:
            target[key] = value


class SameOffsets:
    async def max_offsets(self, brokers: Sequence[str]) -> dict[str, int]:
        return {b: 100 for b in brokers}

    async def transfer_leadership(self, leader: str, peer_id: str) -> None:
        raise AssertionError("no transfer while slaves are outdated")

    async def update_config(self, brokers: Sequence[str], changes: Mapping[str, str]) -> list[str]:
        return []


class RefusingLeader(SameOffsets):
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def transfer_leadership(self, leader: str, peer_id: str) -> None:
        self.asked.append(peer_id)
        raise AdminError("n0 is not the DLedger leader")


def follower(world: World, upgrades: Any = None) -> BrokerGroupFollower:
    hub = FixedHub()
    hub.sub.latest = Election(addr(0), None, None, tuple(
        ReplicaState(i + 1, addr(i), True, True) for i in range(3)))
    return BrokerGroupFollower(world, hub, lambda: "2026-01-01T00:00:00Z", Log(),  # type: ignore[arg-type]
                               reads=world, upgrades=upgrades or SameOffsets())  # type: ignore[arg-type]


async def test_a_fresh_follower_goes_on_from_the_recorded_step() -> None:
    world = World({"revision": "r2", "since": 1e12, "deleted": {"g-1": "a1"},
                   "progress": "0/3 pods upgraded"})
    await follower(world).step(world.body)
    assert world.deleted == ["g-2"]  # g-1 is back at r2 (new uid): the next slave
    assert world.body["status"]["upgrade"]["deleted"] == {"g-2": "a2"}
    # restarted again before g-2 is back: it waits rather than deleting the master
    await follower(world).step(world.body)
    assert world.deleted == ["g-2"]


async def test_a_refused_leadership_transfer_is_asked_again_not_waited_for() -> None:
    world = World({"revision": "r2", "since": 1e12, "deleted": {},
                   "progress": "2/3 pods upgraded"})
    world.pods["g-2"] = pod(2, "r2", "b2")
    leader = RefusingLeader()
    f = follower(world, leader)
    await f.step(world.body)
    await f.step(world.body)
    assert leader.asked == ["n1", "n1"] and world.deleted == []
    assert "transferTo" not in world.body["status"]["upgrade"]
    assert world.events == ["Warning: upgrade: leadership transfer to g-1 failed:"
                            " n0 is not the DLedger leader"]
