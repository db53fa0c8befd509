"""The operator (in-process kopf, fake probes) against the real API server, where the
outcome is the API server's own behaviour: server-side apply removing a field the
operator stops setting, server-defaulted fields causing no write on resync, and the
StatefulSet's immutable claim templates refusing a storage change."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mqcluster_operator.k8s import Ref
from mqcluster_testing.operator.kopf_harness import Harness, running_operator
from mqcluster_testing.operator.realplane.cluster import kube_cluster
from mqcluster_testing.operator.realplane.controlplane import Kube

pytestmark = [pytest.mark.timeout(120)]

BG = "brokergroups.v1alpha1.mqcluster.io"
STS = "apps/v1/statefulsets"


@pytest.fixture
async def h(kube_crds: Kube, kube_namespace: str, tmp_path: Path) -> AsyncIterator[Harness]:
    async with kube_cluster(kube_crds, kube_namespace) as plane, \
            running_operator(cluster=plane) as harness:
        await harness.api.create({
            "apiVersion": "mqcluster.io/v1alpha1", "kind": "Controller",
            "metadata": {"name": "namesrv", "namespace": kube_namespace},
            "spec": {"deployment": "EmbeddedInNamesrv", "replicas": 1}})
        yield harness


def brokergroup(ns: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "mqcluster.io/v1alpha1", "kind": "BrokerGroup",
            "metadata": {"name": "broker-a", "namespace": ns},
            "spec": {"mode": "Controller", "replicas": 2, "controllerRef": {"name": "namesrv"},
                     **spec}}


def bg_ref(ns: str) -> Ref:
    return Ref("mqcluster.io/v1alpha1", "BrokerGroup", ns, "broker-a")


def pod_spec(h: Harness, ns: str) -> dict[str, Any]:
    return dict((h.obj(STS, "broker-a", ns) or {}).get("spec", {}).get("template", {})
                .get("spec", {}))


async def test_a_dropped_node_selector_is_removed_by_server_side_apply(
        h: Harness, kube_namespace: str) -> None:
    ns = kube_namespace
    await h.api.create(brokergroup(ns, scheduling={"nodeSelector": {"disk": "ssd"}}))
    await h.eventually(lambda: pod_spec(h, ns).get("nodeSelector") == {"disk": "ssd"},
                       what="nodeSelector set")
    await h.api.patch(bg_ref(ns), {"spec": {"scheduling": {"nodeSelector": None}}})
    await h.eventually(lambda: pod_spec(h, ns) and "nodeSelector" not in pod_spec(h, ns),
                       what="nodeSelector removed")


async def test_resyncs_of_an_unchanged_group_leave_its_statefulset_untouched(
        h: Harness, kube_namespace: str) -> None:
    ns = kube_namespace
    await h.api.create(brokergroup(ns))
    sts = await h.eventually(lambda: h.obj(STS, "broker-a", ns), what="StatefulSet")
    container = sts["spec"]["template"]["spec"]["containers"][0]
    assert container["terminationMessagePath"] == "/dev/termination-log"  # server default
    # The operator's own writes settle (status, conditions), then resyncs every second.
    await h.eventually(lambda: ((h.obj(BG, "broker-a", ns) or {}).get("status") or {})
                       .get("conditions"), what="status written")
    before = (h.obj(STS, "broker-a", ns) or {})["metadata"]
    await asyncio.sleep(3.5)  # three resyncs at reconcile_interval 1 s
    after = (h.obj(STS, "broker-a", ns) or {})["metadata"]
    assert after["generation"] == before["generation"]
    assert [m for m in after["managedFields"] if m["manager"] == "mqcluster-operator"] == [
        m for m in before["managedFields"] if m["manager"] == "mqcluster-operator"]


async def test_a_storage_size_change_is_refused_by_the_api_server(
        h: Harness, kube_namespace: str) -> None:
    """Refused (Applied=False, a Warning, the claim template unchanged); the reason is
    checked by the next test."""
    ns = kube_namespace
    await h.api.create(brokergroup(ns))
    sts = await h.eventually(lambda: h.obj(STS, "broker-a", ns), what="StatefulSet")
    await h.api.patch(bg_ref(ns), {"spec": {"storage": {"size": "16Gi"}}})
    refused = await h.eventually(
        lambda: (c := next((c for c in ((h.obj(BG, "broker-a", ns) or {}).get("status") or {})
                            .get("conditions") or [] if c["type"] == "Applied"), None))
        and c["status"] == "False" and c, what="the refusal in status")
    assert "the API server refused" in refused["message"] or "cannot change" in refused[
        "message"], refused
    events = await h.eventually(lambda: h.events("ApplyFailed", ns), what="ApplyFailed event")
    assert events[0]["type"] == "Warning"
    claim = (h.obj(STS, "broker-a", ns) or {})["spec"]["volumeClaimTemplates"][0]
    assert claim["spec"]["resources"]["requests"]["storage"] == "8Gi"
    assert claim == sts["spec"]["volumeClaimTemplates"][0]


async def test_a_storage_size_change_is_reported_as_storage_immutable(
        h: Harness, kube_namespace: str) -> None:
    ns = kube_namespace
    await h.api.create(brokergroup(ns))
    await h.eventually(lambda: h.obj(STS, "broker-a", ns), what="StatefulSet")
    await h.api.patch(bg_ref(ns), {"spec": {"storage": {"size": "16Gi"}}})
    refused = await h.eventually(
        lambda: (c := next((c for c in ((h.obj(BG, "broker-a", ns) or {}).get("status") or {})
                            .get("conditions") or [] if c["type"] == "Applied"), None))
        and c["status"] == "False" and c, what="the refusal in status")
    assert refused["reason"] == "StorageImmutable", refused
    assert "storage" in refused["message"] and "cannot change" in refused["message"]
