"""The operator running in-process (kopf) against kmock's emulator.

One operator serves the whole module; every test works in its own namespace.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from mqcluster.protocol.election import Election, ReplicaState
from mqcluster_operator import names
from mqcluster_operator.follow.election_plan import ControllerMeta
from mqcluster_operator.k8s import Ref
from mqcluster_testing.operator.kopf_harness import FakeCluster, Harness, running_operator

from .chart_tools import kinds, rules_of, template

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]

BG = "brokergroups.v1alpha1.mqcluster.io"
MQC = "controllers.v1alpha1.mqcluster.io"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def harness() -> AsyncIterator[Harness]:
    async with running_operator() as h:
        yield h


@dataclass
class Ns:
    """The harness seen from one test's namespace."""

    h: Harness
    ns: str

    @property
    def fake(self) -> FakeCluster:
        return self.h.fake(self.ns)

    def obj(self, plural: str, name: str) -> dict[str, Any] | None:
        return self.h.obj(plural, name, self.ns)

    def status(self, plural: str, name: str) -> dict[str, Any]:
        return dict((self.obj(plural, name) or {}).get("status") or {})

    def condition(self, plural: str, name: str, type_: str) -> dict[str, Any] | None:
        for cond in self.status(plural, name).get("conditions", []):
            if cond["type"] == type_:
                return dict(cond)
        return None

    def events(self, reason: str) -> list[dict[str, Any]]:
        return self.h.events(reason, self.ns)

    def role(self, pod: str) -> str | None:
        meta = (self.obj("v1/pods", pod) or {}).get("metadata", {})
        return (meta.get("labels") or {}).get(names.LABEL_ROLE)

    async def eventually(self, check: Any, what: str) -> Any:
        return await self.h.eventually(check, what=what)

    def controller(self, name: str = "namesrv", **spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": "mqcluster.io/v1alpha1",
            "kind": "Controller",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": {"deployment": "EmbeddedInNamesrv", "replicas": 3, **spec},
        }

    def brokergroup(self, name: str = "broker-a", **spec: Any) -> dict[str, Any]:
        body = {"mode": "Controller", "replicas": 2, "controllerRef": {"name": "namesrv"}}
        body.update(spec)
        return {
            "apiVersion": "mqcluster.io/v1alpha1",
            "kind": "BrokerGroup",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": body,
        }

    def pod(self, group: str, ordinal: int, revision: str = "r1") -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{group}-{ordinal}",
                "namespace": self.ns,
                "labels": {
                    names.LABEL_NAME: "mqcluster-broker",
                    names.LABEL_INSTANCE: group,
                    names.LABEL_COMPONENT: "broker",
                    "controller-revision-hash": revision,
                },
            },
            "spec": {"containers": [{"name": "broker", "image": "mqcluster/broker:0.1.0"}]},
            "status": {"podIP": f"10.0.0.{ordinal + 1}",
                       "conditions": [{"type": "Ready", "status": "True"}]},
        }

    def addr(self, group: str, ordinal: int) -> str:
        return f"{names.pod_dns(group, ordinal, self.ns)}:10911"


@pytest_asyncio.fixture(loop_scope="module")
async def ns(harness: Harness, request: pytest.FixtureRequest) -> AsyncIterator[Ns]:
    name = request.node.name.removeprefix("test_").replace("_", "-")[:50].strip("-")
    yield Ns(harness, name)
    for kind, plural in (("BrokerGroup", BG), ("Controller", MQC)):
        for obj in harness.emulator.all(plural):
            if obj["metadata"]["namespace"] == name:
                ref = Ref("mqcluster.io/v1alpha1", kind, name, obj["metadata"]["name"])
                await harness.api.delete(ref)
    await harness.eventually(
        lambda: not [o for p in (BG, MQC) for o in harness.emulator.all(p)
                     if o["metadata"]["namespace"] == name],
        what=f"custom resources of {name} deleted",
    )


async def test_controller_and_brokergroup_create_their_objects(ns: Ns) -> None:
    await ns.h.api.create(ns.controller())
    await ns.h.api.create(ns.brokergroup())
    for plural, name in [
        ("v1/configmaps", "namesrv-config"),
        ("v1/services", "namesrv-headless"),
        ("apps/v1/statefulsets", "namesrv"),
        ("policy/v1/poddisruptionbudgets", "namesrv"),
        ("v1/configmaps", "broker-a-config"),
        ("v1/services", "broker-a-headless"),
        ("v1/services", "broker-a"),
        ("v1/services", "broker-a-read"),
        ("apps/v1/statefulsets", "broker-a"),
        ("policy/v1/poddisruptionbudgets", "broker-a"),
    ]:
        await ns.eventually(lambda p=plural, n=name: ns.obj(p, n), what=f"{plural} {name}")
    sts = ns.obj("apps/v1/statefulsets", "broker-a") or {}
    assert sts["metadata"]["ownerReferences"][0]["kind"] == "BrokerGroup"
    assert sts["spec"]["updateStrategy"] == {"type": "OnDelete"}
    conf = (ns.obj("v1/configmaps", "broker-a-config") or {})["data"]["broker.conf"]
    assert f"controllerAddr=namesrv-0.namesrv-headless.{ns.ns}.svc:9878" in conf
    assert f"namesrvAddr=namesrv-0.namesrv-headless.{ns.ns}.svc:9876" in conf
    client = ns.obj("v1/services", "broker-a") or {}
    assert client["spec"]["selector"][names.LABEL_ROLE] == "master"
    await ns.eventually(lambda: ns.status(BG, "broker-a").get("observedGeneration") == 1,
                        what="observedGeneration")
    ready = await ns.eventually(lambda: ns.condition(BG, "broker-a", "Ready"), what="Ready")
    assert ready["status"] == "False" and ready["reason"] == "ReplicasNotReady"


async def test_spec_change_is_applied(ns: Ns) -> None:
    await ns.h.api.create(ns.controller())
    await ns.h.api.create(ns.brokergroup())
    await ns.eventually(lambda: ns.obj("apps/v1/statefulsets", "broker-a"), what="StatefulSet")
    await ns.h.api.patch(Ref("mqcluster.io/v1alpha1", "BrokerGroup", ns.ns, "broker-a"),
                         {"spec": {"replicas": 3, "version": "0.2.0"}})
    sts = await ns.eventually(
        lambda: (s := ns.obj("apps/v1/statefulsets", "broker-a")) and s["spec"]["replicas"] == 3
        and s, what="scaled StatefulSet")
    assert sts["spec"]["template"]["spec"]["containers"][0]["image"] == "mqcluster/broker:0.2.0"
    data = (ns.obj("v1/configmaps", "broker-a-config") or {})["data"]
    assert "pod-2.conf" in data
    await ns.eventually(lambda: ns.status(BG, "broker-a").get("observedGeneration") == 2,
                        what="observedGeneration 2")


async def test_invalid_spec_sets_condition_and_event(ns: Ns) -> None:
    await ns.h.api.create(ns.brokergroup(brokerConfig={"noSuchKey": "1"}))
    ready = await ns.eventually(lambda: ns.condition(BG, "broker-a", "Ready"), what="Ready")
    assert ready["status"] == "False" and ready["reason"] == "InvalidSpec"
    assert "noSuchKey" in ready["message"]
    await ns.eventually(lambda: ns.status(BG, "broker-a").get("phase") == "Failed",
                        what="phase Failed")
    events = await ns.eventually(lambda: ns.events("InvalidSpec"), what="InvalidSpec event")
    assert events[0]["type"] == "Warning"
    assert events[0]["involvedObject"]["name"] == "broker-a"
    assert ns.obj("apps/v1/statefulsets", "broker-a") is None


async def test_missing_controller_is_reported(ns: Ns) -> None:
    await ns.h.api.create(ns.brokergroup())
    ready = await ns.eventually(lambda: ns.condition(BG, "broker-a", "Ready"), what="Ready")
    assert ready["reason"] == "ControllerNotFound"
    await ns.h.api.create(ns.controller())
    await ns.eventually(lambda: ns.obj("apps/v1/statefulsets", "broker-a"),
                        what="StatefulSet once the Controller exists")


async def test_following_relabels_pods_and_reports_master_changes(ns: Ns) -> None:
    active = f"namesrv-0.namesrv-headless.{ns.ns}.svc:9878"
    ns.fake.election = Election(
        ns.addr("broker-a", 1), 1, 1,
        (ReplicaState(0, ns.addr("broker-a", 1), True, True),
         ReplicaState(2, ns.addr("broker-a", 0), True, True)),
        active,
    )
    for i in range(2):
        await ns.h.api.create(ns.pod("broker-a", i))
    await ns.h.api.create(ns.controller())
    await ns.h.api.create(ns.brokergroup())
    await ns.eventually(lambda: ns.role("broker-a-1") == "master", what="broker-a-1 master")
    await ns.eventually(lambda: ns.role("broker-a-0") == "slave", what="broker-a-0 slave")
    await ns.eventually(lambda: ns.status(BG, "broker-a").get("masterPod") == "broker-a-1",
                        what="masterPod")
    status = ns.status(BG, "broker-a")
    assert status["masterEpoch"] == 1
    assert sorted(status["syncStateSet"]) == ["broker-a-0", "broker-a-1"]
    assert status["activeController"] == active
    # masterPod is written before the conditions (the failover's news first)
    elected = await ns.eventually(lambda: ns.condition(BG, "broker-a", "MasterElected"),
                                  what="MasterElected")
    assert elected["status"] == "True"
    first = await ns.eventually(lambda: ns.events("MasterChanged"), what="MasterChanged")
    assert "from none to broker-a-1 (epoch 1)" in first[0]["message"]

    ns.fake.election = Election(
        ns.addr("broker-a", 0), 2, 2, (ReplicaState(0, ns.addr("broker-a", 0), True, True),),
    )
    await ns.eventually(lambda: ns.role("broker-a-0") == "master", what="failover relabel")
    assert ns.role("broker-a-1") == "slave"
    await ns.eventually(
        lambda: any("from broker-a-1 to broker-a-0 (epoch 2)" in e["message"]
                    for e in ns.events("MasterChanged")),
        what="second MasterChanged",
    )
    # Ready is counted from the pods (both Ready here), not from the StatefulSet's status
    ready = await ns.eventually(
        lambda: (c := ns.condition(BG, "broker-a", "Ready")) and c["status"] == "True" and c,
        what="Ready")
    assert ready["reason"] == "AllReplicasReady" and ready["message"] == "2/2 replicas ready"


async def test_probe_failure_keeps_labels(ns: Ns) -> None:
    ns.fake.election = Election(ns.addr("broker-a", 0), 1, 1)
    await ns.h.api.create(ns.pod("broker-a", 0))
    await ns.h.api.create(ns.controller())
    await ns.h.api.create(ns.brokergroup(replicas=1))
    await ns.eventually(lambda: ns.role("broker-a-0") == "master", what="master")
    ns.fake.failing = True
    await ns.eventually(
        lambda: (c := ns.condition(BG, "broker-a", "MasterElected")) and c["status"] == "Unknown",
        what="MasterElected Unknown",
    )
    assert ns.role("broker-a-0") == "master"


async def test_switchover_annotation(ns: Ns) -> None:
    ns.fake.election = Election(
        ns.addr("broker-a", 0), 1, 1,
        (ReplicaState(0, ns.addr("broker-a", 0), True, True),
         ReplicaState(2, ns.addr("broker-a", 1), True, True)),
    )
    for i in range(2):
        await ns.h.api.create(ns.pod("broker-a", i))
    await ns.h.api.create(ns.controller())
    await ns.h.api.create(ns.brokergroup())
    await ns.eventually(lambda: ns.status(BG, "broker-a").get("masterPod") == "broker-a-0",
                        what="master known")
    await ns.h.api.patch(
        Ref("mqcluster.io/v1alpha1", "BrokerGroup", ns.ns, "broker-a"),
        {"metadata": {"annotations": {names.ANNOTATION_SWITCHOVER: "broker-a-1"}}},
    )
    await ns.eventually(lambda: ns.fake.switchovers, what="switchover call")
    assert ns.fake.switchovers[0] == ("DefaultCluster", "broker-a", 2)
    await ns.eventually(
        lambda: names.ANNOTATION_SWITCHOVER not in (
            (ns.obj(BG, "broker-a") or {}).get("metadata", {}).get("annotations") or {}),
        what="annotation removed",
    )
    events = await ns.eventually(lambda: ns.events("Switchover"), what="Switchover event")
    assert events[0]["type"] == "Normal"


async def test_restart_annotation_deletes_slaves_first(ns: Ns) -> None:
    ns.fake.election = Election(
        ns.addr("broker-a", 0), 1, 1,
        (ReplicaState(0, ns.addr("broker-a", 0), True, True),
         ReplicaState(2, ns.addr("broker-a", 1), True, True)),
    )
    for i in range(2):
        await ns.h.api.create(ns.pod("broker-a", i))
    await ns.h.api.create(ns.controller())
    await ns.h.api.create(ns.brokergroup())
    await ns.eventually(lambda: ns.status(BG, "broker-a").get("masterPod") == "broker-a-0",
                        what="master known")
    await ns.h.api.patch(
        Ref("mqcluster.io/v1alpha1", "BrokerGroup", ns.ns, "broker-a"),
        {"metadata": {"annotations": {names.ANNOTATION_RESTART: "r1"}}},
    )
    await ns.eventually(lambda: ns.obj("v1/pods", "broker-a-1") is None, what="slave deleted")
    assert ns.obj("v1/pods", "broker-a-0") is not None
    await ns.h.api.create(ns.pod("broker-a", 1))
    await ns.eventually(lambda: ns.obj("v1/pods", "broker-a-0") is None, what="master deleted")
    await ns.h.api.create(ns.pod("broker-a", 0))
    await ns.eventually(
        lambda: (ns.status(BG, "broker-a").get("restart") or {}).get("completed") == "r1",
        what="restart completed",
    )


async def test_pause_annotation_stops_reconciliation(ns: Ns) -> None:
    await ns.h.api.create(ns.controller())
    paused = ns.brokergroup()
    paused["metadata"]["annotations"] = {names.ANNOTATION_PAUSE: "true"}
    await ns.h.api.create(paused)
    await ns.eventually(lambda: ns.status(BG, "broker-a").get("phase") == "Paused",
                        what="phase Paused")
    assert ns.obj("apps/v1/statefulsets", "broker-a") is None


async def test_controller_status_follows_the_active_controller(ns: Ns) -> None:
    ns.fake.meta = ControllerMeta(
        f"namesrv-2.namesrv-headless.{ns.ns}.svc:9878", 7,
        tuple(f"namesrv-{i}.namesrv-headless.{ns.ns}.svc:9878" for i in range(3)),
    )
    await ns.h.api.create(ns.controller())
    await ns.eventually(lambda: ns.status(MQC, "namesrv").get("activeController"),
                        what="activeController")
    status = ns.status(MQC, "namesrv")
    assert status["activeController"] == "namesrv-2"
    assert status["raftTerm"] == 7
    assert status["members"] == ["namesrv-0", "namesrv-1", "namesrv-2"]
    elected = ns.condition(MQC, "namesrv", "LeaderElected")
    assert elected and elected["status"] == "True"
    await ns.eventually(lambda: ns.events("ActiveControllerChanged"), what="event")


async def test_rolling_upgrade_slaves_first_then_switchover(ns: Ns) -> None:
    def election(master: int, epoch: int) -> Election:
        return Election(ns.addr("broker-a", master), epoch, epoch, tuple(
            ReplicaState(i + 1, ns.addr("broker-a", i), True, True) for i in range(2)))

    ns.fake.election = election(0, 1)
    for i in range(2):
        await ns.h.api.create(ns.pod("broker-a", i))
    await ns.h.api.create(ns.controller())
    await ns.h.api.create(ns.brokergroup())
    await ns.eventually(lambda: ns.status(BG, "broker-a").get("masterPod") == "broker-a-0",
                        what="master known")
    await ns.eventually(lambda: ns.obj("apps/v1/statefulsets", "broker-a"), what="StatefulSet")
    await ns.h.api.patch(Ref("apps/v1", "StatefulSet", ns.ns, "broker-a"),
                         {"status": {"updateRevision": "r2"}}, "status")
    await ns.eventually(lambda: ns.obj("v1/pods", "broker-a-1") is None, what="slave restarted")
    assert ns.obj("v1/pods", "broker-a-0") is not None
    await ns.h.api.create(ns.pod("broker-a", 1, "r2"))
    await ns.eventually(lambda: ns.fake.switchovers, what="switchover before the master")
    assert ns.fake.switchovers[-1] == ("DefaultCluster", "broker-a", 2)
    await ns.eventually(
        lambda: (c := ns.condition(BG, "broker-a", "Upgrading")) and c["status"] == "True"
        and c["reason"] == "Switchover",
        what="Upgrading condition",
    )
    ns.fake.election = election(1, 2)
    await ns.eventually(lambda: ns.obj("v1/pods", "broker-a-0") is None,
                        what="old master restarted")
    await ns.h.api.create(ns.pod("broker-a", 0, "r2"))
    await ns.eventually(
        lambda: (c := ns.condition(BG, "broker-a", "Upgrading")) and c["status"] == "False",
        what="upgrade finished",
    )
    assert ns.role("broker-a-1") == "master"


async def test_dledger_upgrade_transfers_leadership_before_the_leader_restarts(ns: Ns) -> None:
    def election(leader: int) -> Election:
        return Election(ns.addr("broker-a", leader), None, None, tuple(
            ReplicaState(i + 1, ns.addr("broker-a", i), True, True) for i in range(3)))

    ns.fake.election = election(0)
    for i in range(3):
        await ns.h.api.create(ns.pod("broker-a", i))
    await ns.h.api.create(ns.controller())
    await ns.h.api.create(ns.brokergroup(mode="DLedger", replicas=3))
    await ns.eventually(lambda: ns.status(BG, "broker-a").get("masterPod") == "broker-a-0",
                        what="leader known")
    await ns.eventually(lambda: ns.obj("apps/v1/statefulsets", "broker-a"), what="StatefulSet")
    await ns.h.api.patch(Ref("apps/v1", "StatefulSet", ns.ns, "broker-a"),
                         {"status": {"updateRevision": "r2"}}, "status")
    for slave in ("broker-a-1", "broker-a-2"):
        await ns.eventually(partial(lambda pod: ns.obj("v1/pods", pod) is None, slave),
                            what=f"{slave} restarted")
        await ns.h.api.create(ns.pod("broker-a", int(slave[-1]), "r2"))
    await ns.eventually(lambda: ns.fake.transfers, what="leadership transfer")
    assert ns.fake.transfers == [("broker-a-0", "n1")]
    assert ns.obj("v1/pods", "broker-a-0") is not None  # not before the leader moved
    ns.fake.election = election(1)
    await ns.eventually(lambda: ns.obj("v1/pods", "broker-a-0") is None,
                        what="old leader restarted")
    await ns.h.api.create(ns.pod("broker-a", 0, "r2"))
    await ns.eventually(
        lambda: (c := ns.condition(BG, "broker-a", "Upgrading")) and c["reason"] == "UpToDate",
        what="upgrade finished")
    messages = [e["message"] for e in ns.events("Upgrade")]
    assert any("transferring leadership to broker-a-1" in m for m in messages)


async def test_a_runtime_config_change_is_pushed_to_the_brokers_without_a_restart(
        ns: Ns) -> None:
    ns.fake.election = Election(ns.addr("broker-a", 0), 1, 1, tuple(
        ReplicaState(i + 1, ns.addr("broker-a", i), True, True) for i in range(2)))
    for i in range(2):
        await ns.h.api.create(ns.pod("broker-a", i))
    await ns.h.api.create(ns.controller())
    await ns.h.api.create(ns.brokergroup(brokerConfig={"autoCreateTopicEnable": "true"}))
    await ns.eventually(lambda: ns.status(BG, "broker-a").get("appliedRuntimeConfig"),
                        what="runtime config recorded")
    template = (ns.obj("apps/v1/statefulsets", "broker-a") or {})["spec"]["template"]
    await ns.h.api.patch(Ref("mqcluster.io/v1alpha1", "BrokerGroup", ns.ns, "broker-a"),
                         {"spec": {"brokerConfig": {"autoCreateTopicEnable": "false"},
                                   "minInSyncReplicas": 2, "inSyncReplicas": 2}})
    await ns.eventually(lambda: ns.events("RuntimeConfig"), what="RuntimeConfig event")
    changes = {"autoCreateTopicEnable": "false", "inSyncReplicas": "2",
               "minInSyncReplicas": "2"}
    assert sorted(ns.fake.config_updates) == [("broker-a-0", changes), ("broker-a-1", changes)]
    await ns.eventually(
        lambda: "autoCreateTopicEnable=false" in (ns.obj("v1/configmaps", "broker-a-config")
                                                  or {}).get("data", {}).get("broker.conf", ""),
        what="ConfigMap updated")
    assert (ns.obj("apps/v1/statefulsets", "broker-a") or {})["spec"]["template"] == template
    assert ns.obj("v1/pods", "broker-a-0") and ns.obj("v1/pods", "broker-a-1")


# The API server's own behaviour (server-side apply removing a field, server defaults and
# resyncs, the StatefulSet's immutable claim templates): test_operator_real.py.


async def test_every_verb_the_operator_used_is_granted_by_the_chart(
    harness: Harness, helm: Path
) -> None:
    """Runs last in this module: the emulator has seen every request of the tests above
    (kopf's own watches and patches, the operator's applies, reads, deletes and events)."""
    granted = rules_of(kinds(template(helm)))
    used = set(harness.emulator.verbs)
    assert {verb for _, _, verb in used} >= {"patch", "create", "list", "watch"}
    missing = sorted(used - granted)
    assert not missing, f"the chart's RBAC lacks {missing}"
