"""Ready follows the pods' readiness as the watch shows it, not the resync; a pod's
readiness change wakes a DLedger group's follower (its election is read from the pods).

The operator runs with a resync and a health poll far longer than any wait below: what
these tests see can only come from the watch events (readiness.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from mqcluster.protocol.election import Election, ReplicaState
from mqcluster_operator import names, reconcile
from mqcluster_operator.follow.election_poller import SharedPoller
from mqcluster_operator.k8s import Ref
from mqcluster_operator.readiness import Coalescer, Tracker, owner_of, pod_signature
from mqcluster_testing.operator.kopf_harness import Harness, running_operator

from .test_operator import BG, MQC, Ns

pytestmark = [pytest.mark.timeout(120)]
LONG = 600.0  # resync and health poll: never reached in these tests
WAIT = 15.0  # far below LONG: what arrives within it came from a watch event


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def harness() -> AsyncIterator[Harness]:
    async with running_operator(follow_interval=LONG, poll_interval=0.05,
                                reconcile_interval=LONG) as h:
        yield h


@pytest_asyncio.fixture(loop_scope="module")
async def ns(harness: Harness, request: pytest.FixtureRequest) -> AsyncIterator[Ns]:
    name = "ready-" + request.node.name.removeprefix("test_").replace("_", "-")[:40].strip("-")
    yield Ns(harness, name)
    for kind, plural in (("BrokerGroup", BG), ("Controller", MQC)):
        for obj in harness.emulator.all(plural):
            if obj["metadata"]["namespace"] == name:
                await harness.api.delete(
                    Ref(names.API_VERSION, kind, name, obj["metadata"]["name"]))


def pod(ns: Ns, group: str, ordinal: int, ready: bool) -> dict[str, Any]:
    body = ns.pod(group, ordinal)
    body["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return body


async def set_ready(ns: Ns, pod_name: str, ready: bool) -> None:
    await ns.h.api.patch(Ref("v1", "Pod", ns.ns, pod_name), {"status": {"conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}}, "status")


def ready_of(ns: Ns, name: str = "broker-a") -> tuple[str, str, str] | None:
    cond = ns.condition(BG, name, "Ready")
    return (cond["status"], cond["reason"], cond["message"]) if cond else None


def election(ns: Ns, master: int, replicas: int = 3) -> Election:
    return Election(ns.addr("broker-a", master), 1, 1, tuple(
        ReplicaState(i, ns.addr("broker-a", i), True, True) for i in range(replicas)))


@pytest.mark.asyncio(loop_scope="module")
async def test_ready_follows_the_pods_without_a_resync(ns: Ns) -> None:
    ns.fake.election = election(ns, 0)
    for i in range(3):
        await ns.h.api.create(pod(ns, "broker-a", i, ready=False))
    await ns.h.api.create(ns.controller())
    await ns.h.api.create(ns.brokergroup(replicas=3))
    await ns.eventually(lambda: ns.status(BG, "broker-a").get("masterPod") == "broker-a-0",
                        what="masterPod")
    await ns.eventually(lambda: (r := ready_of(ns)) and r[:2] == ("False", "ReplicasNotReady"),
                        what="Ready=False")
    for i in range(3):
        await set_ready(ns, f"broker-a-{i}", True)
    await ns.h.eventually(lambda: (r := ready_of(ns)) and r[0] == "True", timeout=WAIT,
                          what=lambda: f"Ready=True after the last pod, got {ready_of(ns)}")
    status = ns.status(BG, "broker-a")
    assert (status["phase"], status["readyReplicas"]) == ("Running", 3)

    # a replica NotReady (its process killed): Ready=False naming it, phase Degraded
    await set_ready(ns, "broker-a-1", False)
    await ns.h.eventually(lambda: (r := ready_of(ns)) and r[0] == "False", timeout=WAIT,
                          what="Ready=False while a replica is NotReady")
    assert ready_of(ns) == ("False", "ReplicasNotReady",
                            "2/3 replicas ready (broker-a-1 not Ready)")
    assert ns.status(BG, "broker-a")["phase"] == "Degraded"
    await set_ready(ns, "broker-a-1", True)
    await ns.h.eventually(lambda: (r := ready_of(ns)) and r[0] == "True", timeout=WAIT,
                          what="Ready=True again")


@pytest.mark.asyncio(loop_scope="module")
async def test_the_controller_resource_is_ready_when_its_pods_are(ns: Ns) -> None:
    await ns.h.api.create(ns.controller(replicas=3))
    await ns.eventually(lambda: ns.condition(MQC, "namesrv", "Ready"), what="Ready")
    for i in range(3):
        body = pod(ns, "namesrv", i, ready=True)
        body["metadata"]["labels"].update({names.LABEL_COMPONENT: "controller",
                                           names.LABEL_NAME: "mqcluster-controller"})
        await ns.h.api.create(body)
    await ns.h.eventually(
        lambda: (c := ns.condition(MQC, "namesrv", "Ready")) and c["status"] == "True",
        timeout=WAIT, what="Controller Ready=True")


@pytest.mark.asyncio(loop_scope="module")
async def test_a_dledger_leader_change_is_read_when_a_pod_turns_not_ready(ns: Ns) -> None:
    """The brokers' health is polled every LONG seconds here: only the pod's readiness
    change (the killed leader's pod) makes the follower read the new leader."""
    ns.fake.election = election(ns, 0)
    for i in range(3):
        await ns.h.api.create(pod(ns, "broker-a", i, ready=True))
    await ns.h.api.create(ns.brokergroup(mode="DLedger", replicas=3, controllerRef=None,
                                         namesrvAddr="namesrv:9876"))
    await ns.eventually(lambda: ns.role("broker-a-0") == "master", what="leader labelled")
    ns.fake.election = election(ns, 2)
    await asyncio.sleep(0.5)  # many fast poll intervals: the health poll is not fast
    assert ns.role("broker-a-0") == "master"
    await set_ready(ns, "broker-a-0", False)
    await ns.h.eventually(lambda: ns.role("broker-a-2") == "master", timeout=WAIT,
                          what="new leader labelled after the old one's pod turned NotReady")
    await ns.h.eventually(lambda: ns.status(BG, "broker-a")["masterPod"] == "broker-a-2",
                          timeout=WAIT, what="status.masterPod follows")
    assert ns.role("broker-a-0") == "slave"


def test_ready_is_counted_from_the_pods_that_are_ready_and_not_leaving() -> None:
    def p(name: str, ready: bool, leaving: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name}
        if leaving:
            meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        return {"metadata": meta, "status": {"conditions": [
            {"type": "Ready", "status": "True" if ready else "False"}]}}

    pods = [p("g-0", True), p("g-1", True, leaving=True), p("g-2", False), p("g-3", True)]
    assert reconcile.ready_pods("g", 3, pods) == (1, ["g-1", "g-2"])
    body = {"metadata": {"name": "g"}, "spec": {"replicas": 3},
            "status": {"masterPod": "g-0"}}
    sts = {"status": {"readyReplicas": 3}}  # lags behind the pods
    out = reconcile.readiness(body, sts, "now", True, pods)
    assert out["readyReplicas"] == 1 and out["phase"] == "Degraded"
    ready = next(c for c in out["conditions"] if c["type"] == "Ready")
    assert ready["message"] == "1/3 replicas ready (g-1, g-2 not Ready)"
    # without the pods, the StatefulSet's count
    assert reconcile.readiness(body, sts, "now", True)["readyReplicas"] == 3


def test_only_a_readiness_change_of_an_operator_pod_counts() -> None:
    labels = {names.LABEL_INSTANCE: "g", names.LABEL_COMPONENT: "broker"}
    body: dict[str, Any] = {"metadata": {"name": "g-0", "namespace": "n", "labels": labels,
                                         "uid": "u"},
                            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert owner_of(body) == ("BrokerGroup", "n", "g")
    assert owner_of({"metadata": {"labels": {names.LABEL_INSTANCE: "x"}}}) is None
    seen = Tracker()
    assert seen.changed("Pod", body, pod_signature(body, "ADDED"))
    body["metadata"]["labels"] = {**labels, "role": "master"}  # a relabel: not readiness
    assert not seen.changed("Pod", body, pod_signature(body, "MODIFIED"))
    body["status"]["conditions"][0]["status"] = "False"
    assert seen.changed("Pod", body, pod_signature(body, "MODIFIED"))
    assert seen.changed("Pod", body, pod_signature(body, "DELETED"))
    assert not seen.changed("Pod", body, pod_signature(body, "DELETED"))


async def test_pokes_in_a_burst_make_one_run_and_a_poke_during_a_run_one_more() -> None:
    runs: list[str] = []
    gate = asyncio.Event()

    async def action(key: str) -> None:
        runs.append(key)
        await gate.wait()

    coalescer = Coalescer(action, delay=0.0)
    for _ in range(3):
        coalescer.poke("a")
    coalescer.poke("b")
    while len(runs) < 2:
        await asyncio.sleep(0)
    coalescer.poke("a")  # during the run: once more after it
    coalescer.poke("a")
    gate.set()
    for _ in range(20):
        await asyncio.sleep(0)
    assert sorted(runs) == ["a", "a", "b"]
    await coalescer.close()


async def test_a_hurried_poller_polls_at_its_fast_interval_for_a_while() -> None:
    now = [100.0]

    class Probe:
        async def close(self) -> None:
            pass

    poller = SharedPoller(Probe(), 2.0, 5.0, fast_interval=0.2,  # type: ignore[arg-type]
                          clock=lambda: now[0])
    assert poller.delay() == 2.0
    poller.hurry(5.0)
    assert poller.delay() == 0.2
    now[0] += 4.9
    assert poller.delay() == 0.2
    now[0] += 0.2
    assert poller.delay() == 2.0


async def test_a_failover_writes_the_new_master_before_the_conditions() -> None:
    from mqcluster_operator.conditions import FOLLOWER
    from mqcluster_operator.k8s import Api

    class Recording(Api):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[str] = []

        async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
            self.calls.append("conditions" if "fieldManager" in (kwargs.get("params") or {})
                              else "fields")
            return {}

    ref = Ref(names.API_VERSION, "BrokerGroup", "n", "g")
    status = {"masterPod": "g-1", "conditions": [
        {"type": "MasterElected", "status": "True", "reason": "Elected", "message": ""}]}
    api = Recording()
    await api.write_status(ref, status, FOLLOWER, fields_first=True)
    assert api.calls == ["fields", "conditions"]
    api.calls.clear()
    await api.write_status(ref, status, FOLLOWER)
    assert api.calls == ["conditions", "fields"]
