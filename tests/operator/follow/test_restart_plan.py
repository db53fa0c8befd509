"""A requested rolling restart, as pure planning."""

from __future__ import annotations

from mqcluster_operator.follow.election_plan import PodInfo
from mqcluster_operator.follow.restart_plan import plan_restart

from .test_election_plan import pods


def test_restart_goes_slaves_first_and_waits_for_each_pod() -> None:
    ps = pods("slave", "master", "slave")
    step = plan_restart("r1", None, ps, 3, "bg-1")
    assert step.delete is None and step.status == {
        "requested": "r1", "pending": ["bg-0", "bg-2", "bg-1"], "deleted": {}}
    step = plan_restart("r1", step.status, ps, 3, "bg-1")
    assert step.delete == "bg-0"
    state = step.status
    assert plan_restart("r1", state, ps, 3, "bg-1").delete is None  # same uid: not recreated
    assert plan_restart("r1", state, ps[1:], 3, "bg-1").delete is None  # pod missing
    back = [PodInfo("bg-0", None, "slave", False, "new"), *ps[1:]]
    assert plan_restart("r1", state, back, 3, "bg-1").delete is None  # not ready yet
    back = [PodInfo("bg-0", None, "slave", True, "new"), *ps[1:]]
    step = plan_restart("r1", state, back, 3, "bg-1")
    assert step.delete == "bg-2"
    back = [back[0], back[1], PodInfo("bg-2", None, "slave", True, "new2")]
    step = plan_restart("r1", step.status, back, 3, "bg-1")
    assert step.delete == "bg-1"
    done_pods = [back[0], PodInfo("bg-1", None, "slave", True, "new1"), back[2]]
    step = plan_restart("r1", step.status, done_pods, 3, "bg-0")
    assert step.done and step.status == {"completed": "r1"}
    assert plan_restart("r1", step.status, done_pods, 3, "bg-0").status is None
