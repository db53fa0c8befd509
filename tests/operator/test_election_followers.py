"""A BrokerGroup's follower step against reads that lag behind its own writes."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any

from mqcluster_operator import names
from mqcluster_operator.election_followers import BrokerGroupFollower
from mqcluster_operator.follow.election_plan import Election, ReplicaState
from mqcluster_operator.follow.epochs_plan import ReplicaEpochs
from mqcluster_operator.k8s import Ref

NS = "ns"
BODY = {
    "apiVersion": names.API_VERSION, "kind": "BrokerGroup",
    "metadata": {"name": "g", "namespace": NS, "uid": "u1", "generation": 1},
    "spec": {"mode": "DLedger", "replicas": 3},
}


def addr(ordinal: int) -> str:
    return f"{names.pod_dns('g', ordinal, NS)}:10911"


def pod(ordinal: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"g-{ordinal}", "namespace": NS,
                     "labels": {names.LABEL_NAME: "mqcluster-broker",
                                names.LABEL_INSTANCE: "g", names.LABEL_COMPONENT: "broker"}},
        "status": {"podIP": f"10.0.0.{ordinal + 1}",
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


class StaleReads:
    """An index that never sees the follower's status writes (the watch lags)."""

    async def get(self, ref: Ref) -> dict[str, Any] | None:
        return dict(BODY) if ref.kind == "BrokerGroup" else None

    async def list(self, ref: Ref, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        return [pod(0), pod(1)]


class RecordingApi:
    def __init__(self) -> None:
        self.events: list[str] = []
        self.statuses: list[dict[str, Any]] = []

    async def patch(self, ref: Ref, body: Any, subresource: str | None = None) -> None:
        pass

    async def write_status(self, ref: Ref, status: Mapping[str, Any], writer: Any,
                           fields_first: bool = False) -> None:
        self.statuses.append(dict(status))

    async def post_event(self, event: dict[str, Any]) -> None:
        self.events.append(event["message"])


class FixedSubscription:
    def __init__(self) -> None:
        self.latest: Election | None = None
        self.changed = asyncio.Event()
        self.probe = None

    async def close(self) -> None:
        pass


class FixedHub:
    def __init__(self) -> None:
        self.sub = FixedSubscription()

    def subscribe(self, target: Any, broker_name: str) -> FixedSubscription:
        return self.sub


class Log:
    def info(self, *args: Any) -> None:
        pass


def election(master: int, epoch: int) -> Election:
    return Election(addr(master), epoch, epoch, (ReplicaState(master, addr(master), True, True),))


async def test_a_second_master_change_names_the_first_master_though_the_index_lags() -> None:
    api, hub = RecordingApi(), FixedHub()
    follower = BrokerGroupFollower(api, hub, lambda: "2026-01-01T00:00:00Z", Log(),  # type: ignore[arg-type]
                                   reads=StaleReads())
    hub.sub.latest = election(1, 1)
    await follower.step(BODY, changed=True)
    hub.sub.latest = election(0, 2)
    await follower.step(BODY, changed=True)
    await follower.step(BODY)
    assert api.events == [
        "master changed from none to g-1 (epoch 1)",
        "master changed from g-1 to g-0 (epoch 2)",
    ]
    assert [s["masterPod"] for s in api.statuses if "masterPod" in s] == ["g-1", "g-0"]


class MigrationWorld:
    """A BrokerGroup, its Controller and pods; ``settle`` plays the reconciler and the
    kubelet after each follower step: objects rendered as the recorded migration says,
    pods stopped or started, replicas registering with the controller once running."""

    def __init__(self) -> None:
        self.body: dict[str, Any] = {
            "apiVersion": names.API_VERSION, "kind": "BrokerGroup",
            "metadata": {"name": "g", "namespace": NS, "uid": "u1", "generation": 2,
                         "annotations": {}},
            "spec": {"mode": "Controller", "replicas": 3, "controllerRef": {"name": "ctl"}},
            "status": {"appliedMode": "DLedger", "readyReplicas": 3},
        }
        self.controller = {
            "apiVersion": names.API_VERSION, "kind": "Controller",
            "metadata": {"name": "ctl", "namespace": NS},
            "spec": {"replicas": 3},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }
        self.pods = [pod(i) for i in range(3)]
        self.hub = FixedHub()
        self.events: list[str] = []
        self.steps: list[str] = []
        self.other_groups: list[dict[str, Any]] = []

    async def get(self, ref: Ref) -> dict[str, Any] | None:
        return {"BrokerGroup": self.body, "Controller": self.controller}.get(ref.kind)

    async def list(self, ref: Ref, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        if ref.kind == "BrokerGroup":
            return [self.body, *self.other_groups]
        return list(self.pods)

    async def patch(self, ref: Ref, body: Any, subresource: str | None = None) -> None:
        for key, value in (body.get("metadata", {}).get("annotations") or {}).items():
            if value is None:
                self.body["metadata"]["annotations"].pop(key, None)

    async def write_status(self, ref: Ref, status: Mapping[str, Any], writer: Any,
                           fields_first: bool = False) -> None:
        for key, value in status.items():
            if value is None:
                self.body["status"].pop(key, None)
            else:
                self.body["status"][key] = value
        step = (status.get("migration") or {}).get("step")
        if step and (not self.steps or self.steps[-1] != step):
            self.steps.append(step)

    async def post_event(self, event: dict[str, Any]) -> None:
        self.events.append(f"{event['reason']}: {event['message']}")

    def settle(self) -> None:
        from mqcluster_operator.follow.migration_plan import rendering
        from mqcluster_operator.models import BrokerGroupSpec

        spec = BrokerGroupSpec.model_validate(self.body["spec"])
        status = self.body["status"]
        render = rendering(spec, status.get("appliedMode"), status.get("migration"))
        status["appliedMode"] = render.mode
        self.pods = [] if render.stopped else [pod(i) for i in range(3)]
        status["readyReplicas"] = len(self.pods)
        if render.mode == "DLedger":
            self.hub.sub.latest = Election(addr(0), 3, None, ())
        else:
            replicas = tuple(ReplicaState(i, addr(i), True, True) for i in range(3))
            self.hub.sub.latest = Election(addr(1), 1, 1, replicas)


class DrainingDriver:
    def __init__(self, lags: list[int]) -> None:
        self.lags = lags
        self.writes: list[bool] = []
        self.compared = 0

    async def set_writes(self, brokers: Any, on: bool) -> None:
        assert len(brokers) == 3
        self.writes.append(on)

    async def lag(self, broker: str) -> int | None:
        assert broker.startswith("g-0.")  # the DLedger leader
        return self.lags.pop(0) if len(self.lags) > 1 else self.lags[0]

    async def metadata_behind(self, leader: str, followers: Any) -> list[str] | None:
        assert leader.startswith("g-0.") and len(followers) == 2
        self.compared += 1
        # The first comparison finds g-2 still without the leader's newest topic.
        return [f for f in followers if f.startswith("g-2.")] if self.compared == 1 else []

    async def epochs(self, brokers: Any) -> dict[str, Any]:
        return {}


async def test_a_migration_runs_to_the_end_with_the_operator_restarted_at_every_step() -> None:
    world, driver = MigrationWorld(), DrainingDriver([5, 2, 0])
    world.settle()
    for _ in range(12):
        follower = BrokerGroupFollower(world, world.hub, lambda: "2026-01-01T00:00:00Z",  # type: ignore[arg-type]
                                       Log(), reads=world, driver=driver)
        await follower.step(world.body)
        world.settle()
    status = world.body["status"]
    assert world.steps == ["Draining", "Stopping", "Restarting", "Done"]
    assert driver.compared == 2  # Stopping waited for g-2 to hold the leader's topics
    assert status["appliedMode"] == "Controller" and status["masterPod"] == "g-1"
    assert driver.writes[0] is False and driver.writes[-1] is True
    assert True not in driver.writes[:-1]
    migrating = next(c for c in status["conditions"] if c["type"] == "Migrating")
    assert (migrating["status"], migrating["reason"]) == ("False", "Completed")
    assert [e for e in world.events if e.startswith("Migration:")] == [
        "Migration: migration to controller mode started: writes off",
        "Migration: drained (0 message(s) left to consume); stopping the pods",
        "Migration: pods stopped; starting in controller mode, stores cleared except "
        "config/topics.json, config/subscriptionGroup.json",
        "Migration: migration completed: master g-1, writes back on",
    ]


async def test_an_abort_while_draining_turns_writes_back_on() -> None:
    world, driver = MigrationWorld(), DrainingDriver([5])
    world.settle()
    follower = BrokerGroupFollower(world, world.hub, lambda: "2026-01-01T00:00:00Z",  # type: ignore[arg-type]
                                   Log(), reads=world, driver=driver)
    await follower.step(world.body)
    world.body["metadata"]["annotations"][names.ANNOTATION_MIGRATION] = "abort"
    await follower.step(world.body)
    world.settle()
    await follower.step(world.body)
    assert world.steps == ["Draining", "Aborted"]
    assert driver.writes == [False, True]
    assert world.body["status"]["appliedMode"] == "DLedger"
    assert names.ANNOTATION_MIGRATION not in world.body["metadata"]["annotations"]


async def test_a_group_waits_while_another_group_of_the_cluster_migrates() -> None:
    world, driver = MigrationWorld(), DrainingDriver([5])
    world.other_groups = [{
        "metadata": {"name": "a-group", "namespace": NS},
        "spec": {"mode": "Controller"},
        "status": {"appliedMode": "DLedger", "migration": {"step": "Draining", "id": "m1"}},
    }]
    world.settle()
    follower = BrokerGroupFollower(world, world.hub, lambda: "2026-01-01T00:00:00Z",  # type: ignore[arg-type]
                                   Log(), reads=world, driver=driver)
    await follower.step(world.body)
    assert world.steps == [] and driver.writes == []
    waiting = next(c for c in world.body["status"]["conditions"] if c["type"] == "Migrating")
    assert waiting["reason"] == "WaitingForGroup" and "a-group" in waiting["message"]
    world.other_groups[0]["status"]["migration"]["step"] = "Done"
    world.other_groups[0]["status"]["appliedMode"] = "Controller"
    await follower.step(world.body)
    assert world.steps == ["Draining"] and driver.writes == [False]


class LaggingWorld(MigrationWorld):
    """Reads answer from the group as it was before the last round's writes, as kopf's
    index does while the watch has not yet delivered them."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = copy.deepcopy(self.body)

    async def get(self, ref: Ref) -> dict[str, Any] | None:
        return {"BrokerGroup": self.seen, "Controller": self.controller}.get(ref.kind)

    async def list(self, ref: Ref, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        return [self.seen] if ref.kind == "BrokerGroup" else list(self.pods)


async def test_one_follower_reading_a_lagging_index_neither_repeats_a_step_nor_reverts_a_condition(
        ) -> None:
    world, driver = LaggingWorld(), DrainingDriver([0])
    world.settle()
    follower = BrokerGroupFollower(world, world.hub, lambda: "2026-01-01T00:00:00Z",  # type: ignore[arg-type]
                                   Log(), reads=world, driver=driver)
    for _ in range(12):
        before = copy.deepcopy(world.body)
        await follower.step(world.body)
        world.settle()
        world.seen = before
    assert world.steps == ["Draining", "Stopping", "Restarting", "Done"]
    migrating = next(c for c in world.body["status"]["conditions"] if c["type"] == "Migrating")
    assert (migrating["status"], migrating["reason"]) == ("False", "Completed")
    completed = [e for e in world.events if "migration completed" in e]
    assert len(completed) == 1


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
            follower._epochs_at = float("-inf")  # read the epochs every round
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
