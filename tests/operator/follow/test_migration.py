"""The migration step of a BrokerGroup follower: a DLedger group moved to controller mode
step by step, with the operator restarted, aborted, waiting for another group, and
reading an index that lags behind."""

from __future__ import annotations

import copy
from typing import Any

from mqcluster_operator import names
from mqcluster_operator.follow.daemon import BrokerGroupFollower

from .fakes import NS, LaggingWorld, Log, MigrationWorld


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
