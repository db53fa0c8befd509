"""The epoch step of a BrokerGroup follower: a conflicting replica reported, and a wipe
a person approved carried out once."""

from __future__ import annotations

import copy
from typing import Any

from mqcluster_operator import names
from mqcluster_operator.follow.daemon import BrokerGroupFollower
from mqcluster_operator.follow.epochs_plan import ReplicaEpochs
from mqcluster_operator.k8s import Ref

from .fakes import LaggingWorld, Log


class EpochWorld(LaggingWorld):
    """A controller-mode group whose g-2 holds a history from another life of the
    group; deletions are recorded; reads lag one round behind."""

    def __init__(self) -> None:
        super().__init__()
        self.body["status"] = {"appliedMode": "Controller", "readyReplicas": 3}
        self.seen = copy.deepcopy(self.body)
        self.deleted: list[str] = []

    async def delete(self, ref: Ref) -> bool:
        self.deleted.append(f"{ref.kind}/{ref.name}")
        return True

    async def patch(self, ref: Ref, body: Any, subresource: str | None = None) -> None:
        for key, value in (body.get("metadata", {}).get("annotations") or {}).items():
            if value is None:
                self.body["metadata"]["annotations"].pop(key, None)


class EpochDriver:
    def __init__(self) -> None:
        self.foreign = True

    async def epochs(self, brokers: Any) -> dict[str, ReplicaEpochs]:
        ours = ReplicaEpochs(((1, 0, 100), (2, 100, 300)), 300)
        other = ReplicaEpochs(((7, 0, 50),), 50) if self.foreign else ReplicaEpochs((), 0)
        return {b: other if b.startswith("g-2.") else ours for b in brokers}


async def test_an_epoch_conflict_is_reported_and_an_approved_wipe_runs_once() -> None:
    world, driver = EpochWorld(), EpochDriver()
    world.settle()
    follower = BrokerGroupFollower(world, world.hub, lambda: "2026-01-01T00:00:00Z",  # type: ignore[arg-type]
                                   Log(), reads=world, driver=driver)  # type: ignore[arg-type]

    async def rounds(n: int) -> None:
        for _ in range(n):
            before = copy.deepcopy(world.body)
            follower.memo.epochs.read_at = float("-inf")  # read the epochs every round
            await follower.step(world.body)
            world.settle()
            world.seen = before

    await rounds(3)
    status = world.body["status"]
    degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "EpochConflict")
    assert status["epochConflicts"] == ["g-2"]
    assert [r["epochs"][0]["epoch"] for r in status["replicas"]] == [1, 1, 7]
    assert sum("g-2 shares no epoch" in e for e in world.events) == 1

    world.body["metadata"]["annotations"][names.ANNOTATION_WIPE_REPLICA] = "g-2"
    await rounds(1)
    driver.foreign = False  # the recreated pod starts empty
    await rounds(3)  # the index still shows the annotation for a round
    assert world.deleted == ["PersistentVolumeClaim/data-g-2", "Pod/g-2"]
    assert names.ANNOTATION_WIPE_REPLICA not in world.body["metadata"]["annotations"]
    degraded = next(c for c in world.body["status"]["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("False", "EpochsConsistent")
