"""The node agent on the real control plane, without the operator: a Controller's objects
(as the operator builds them) applied by the test; the real StatefulSet controller makes
the pods in order, the agent binds and runs them, restarts a killed process and
finalizes a deleted pod, which the controller makes anew."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from mqcluster_operator.manifests import Owner, build_controller
from mqcluster_operator.models import ControllerSpec
from mqcluster_testing.operator.realplane.controlplane import KubeApi
from mqcluster_testing.operator.realplane.node_agent import NodeAgent

pytestmark = [pytest.mark.timeout(120)]


async def eventually(check: Callable[[], Any], what: Callable[[], str] | str,
                     timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what() if callable(what) else what}")
        await asyncio.sleep(0.05)
    return result


def pod(agent: NodeAgent, name: str) -> dict[str, Any]:
    return dict(agent.mirror.live("v1/pods", agent.namespace, name) or {})


def container(agent: NodeAgent, name: str) -> dict[str, Any]:
    return dict(((pod(agent, name).get("status") or {}).get("containerStatuses") or [{}])[0])


def ready(agent: NodeAgent, name: str) -> bool:
    conditions = (pod(agent, name).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def apply_controller(api: KubeApi, namespace: str, replicas: int,
                           ordered: bool = False) -> None:
    body = await api.create({"apiVersion": "mqcluster.io/v1alpha1", "kind": "Controller",
                             "metadata": {"name": "mqc", "namespace": namespace},
                             "spec": {"replicas": replicas}})
    spec = ControllerSpec.model_validate(body["spec"])
    for obj in build_controller(Owner.from_body(body), spec):
        if ordered and obj["kind"] == "StatefulSet":
            obj["spec"]["podManagementPolicy"] = "OrderedReady"
        await api.apply(obj)


async def test_pods_of_the_real_statefulset_controller_run_restart_and_are_finalized(
        kube_api: KubeApi, node_agent: NodeAgent) -> None:
    ns, agent = node_agent.namespace, node_agent
    await apply_controller(kube_api, ns, replicas=3)

    def describe() -> str:
        return f"pods {[(p, container(agent, p)) for p in ('mqc-0', 'mqc-1', 'mqc-2')]}; " \
            f"errors {agent.errors} slots {agent.slots} running {agent.running}"

    await eventually(lambda: all(ready(agent, f"mqc-{i}") for i in range(3)), describe)
    status = pod(agent, "mqc-0")["status"]
    assert status["phase"] == "Running" and status["podIP"] == agent.ip_of("mqc-0")
    assert {c["type"] for c in status["conditions"]} >= {
        "PodScheduled", "Initialized", "ContainersReady", "Ready"}
    assert pod(agent, "mqc-0")["spec"]["nodeName"] == agent.node
    assert container(agent, "mqc-0")["started"] is True
    assert "running" in container(agent, "mqc-0")["state"]
    assert pod(agent, "mqc-0")["metadata"]["labels"]["controller-revision-hash"]
    sts = await eventually(
        lambda: (s := agent.mirror.live("apps/v1/statefulsets", ns, "mqc"))
        and (s.get("status") or {}).get("readyReplicas") == 3 and s, "readyReplicas 3")
    assert sts["status"]["availableReplicas"] == 3

    # A killed process is started again in the same pod: restartCount 1.
    uid = pod(agent, "mqc-1")["metadata"]["uid"]
    await agent.kill("mqc-1")
    await eventually(lambda: container(agent, "mqc-1").get("restartCount") == 1
                     and ready(agent, "mqc-1"), describe)
    assert pod(agent, "mqc-1")["metadata"]["uid"] == uid
    assert agent.started.count("mqc-1") == 2

    # A deleted pod is finalized (process stopped, deleted at once) and made anew.
    old = pod(agent, "mqc-2")["metadata"]["uid"]
    await kube_api.request("DELETE", f"/api/v1/namespaces/{ns}/pods/mqc-2")
    await eventually(lambda: pod(agent, "mqc-2").get("metadata", {}).get("uid") not in
                     (None, old) and ready(agent, "mqc-2")
                     and container(agent, "mqc-2").get("restartCount") == 0, describe)
    assert agent.started.count("mqc-2") == 2
    assert set(agent.running) == {"mqc-0", "mqc-1", "mqc-2"}


async def test_pvcs_come_from_the_controller_and_a_new_claim_is_a_new_volume(
        kube_api: KubeApi, node_agent: NodeAgent) -> None:
    ns, agent = node_agent.namespace, node_agent
    await apply_controller(kube_api, ns, replicas=1)
    await eventually(lambda: ready(agent, "mqc-0"), lambda: f"errors {agent.errors}")
    claim = agent.mirror.live("v1/persistentvolumeclaims", ns, "data-mqc-0")
    assert claim is not None  # made by the StatefulSet controller, not the agent
    first = agent.data_dir("mqc-0")
    assert claim["metadata"]["uid"][:8] in first.name
    (first / "marker").write_text("old volume")
    # Scale to 0, delete the claim, scale back: a new claim, a new empty directory.
    sts_path = f"/apis/apps/v1/namespaces/{ns}/statefulsets/mqc"
    await kube_api.request("PATCH", sts_path, body={"spec": {"replicas": 0}},
                           content_type="application/merge-patch+json")
    await eventually(lambda: not pod(agent, "mqc-0") and "mqc-0" not in agent.running,
                     "mqc-0 gone")
    await kube_api.request("DELETE", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/"
                                     "data-mqc-0")
    await eventually(lambda: agent.mirror.live("v1/persistentvolumeclaims", ns,
                                               "data-mqc-0") is None, "claim deleted")
    await kube_api.request("PATCH", sts_path, body={"spec": {"replicas": 1}},
                           content_type="application/merge-patch+json")
    await eventually(lambda: ready(agent, "mqc-0"), lambda: f"errors {agent.errors}")
    assert agent.data_dir("mqc-0") != first
    assert not (agent.data_dir("mqc-0") / "marker").exists()
