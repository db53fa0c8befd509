"""The operator started as the chart starts it, on the real API server: ``kopf`` with the
Deployment's args and env from ``helm template``, logged in with a token of the chart's
ServiceAccount bound by the chart's RBAC. It stays up, reconciles a Controller and a
BrokerGroup, and is never refused (no 400 on its watches, no 403 on its calls)."""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from mqcluster_operator.k8s import APPLY_PATCH
from mqcluster_testing.operator.realplane.controlplane import (
    CRDS,
    TEST_CLIENT,
    Kube,
    KubeApi,
    token_kubeconfig,
)
from mqcluster_testing.procs import Procs, procs  # noqa: F401  (fixture)

from .chart_tools import kinds, template

pytestmark = [pytest.mark.timeout(180)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def object_path(obj: dict[str, Any]) -> str:
    """The REST path of an object of the chart (plural: the kind in lower case + s)."""
    api_version, meta = obj["apiVersion"], obj["metadata"]
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    scope = f"/namespaces/{meta['namespace']}" if meta.get("namespace") else ""
    return f"{base}{scope}/{obj['kind'].lower()}s/{meta['name']}"


async def apply(api: KubeApi, obj: dict[str, Any]) -> None:
    await api.request("PATCH", object_path(obj), body=obj, content_type=APPLY_PATCH,
                      params={"fieldManager": TEST_CLIENT, "force": "true"})


async def apply_chart_crds(kube: Kube, api: KubeApi, objs: dict[str, list[dict[str, Any]]],
                           ) -> None:
    """Our CRDs as crds/ has them; the chart's others (kopf's peering) without the release's
    labels, which a later helm install in the same control plane must be free to own."""
    await kube.apply_crds(api)
    ours = {yaml.safe_load(p.read_text())["metadata"]["name"] for p in CRDS.glob("*.yaml")}
    for crd in objs.get("CustomResourceDefinition", []):
        name = crd["metadata"]["name"]
        if name not in ours:
            crd["metadata"] = {"name": name}
            await apply(api, crd)
            await established(api, name)


async def install_chart_objects(kube: Kube, api: KubeApi, ns: str,
                                objs: dict[str, list[dict[str, Any]]],
                                ) -> tuple[dict[str, Any], str]:
    """What the chart installs besides the operator's Deployment (CRDs, ServiceAccount,
    RBAC, kopf's peering), as helm would; the Deployment and a token of its ServiceAccount.
    The cluster-scoped objects get the namespace's name (unique per test)."""
    for obj in [o for kind in ("ClusterRole", "ClusterRoleBinding") for o in objs.get(kind, [])]:
        obj["metadata"]["name"] = f"{ns}-{obj['metadata']['name']}"
        if obj["kind"] == "ClusterRoleBinding":
            obj["roleRef"]["name"] = f"{ns}-{obj['roleRef']['name']}"
    await apply_chart_crds(kube, api, objs)
    for kind in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                 "ClusterKopfPeering", "KopfPeering"):
        for obj in objs.get(kind, []):
            await apply(api, obj)
    [deployment] = objs["Deployment"]
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    return deployment, await kube.service_account_token(api, ns, account)


async def established(api: KubeApi, name: str) -> None:
    for _ in range(200):
        crd = await api.get_path(
            f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}") or {}
        if any(c["type"] == "Established" and c["status"] == "True"
               for c in (crd.get("status") or {}).get("conditions") or []):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"CRD {name} not Established")


def operator_command(deployment: dict[str, Any], liveness: int) -> tuple[list[str], dict[str, str]]:
    """argv and env of the Deployment's container, as a local process: the liveness
    endpoint on a free loopback port, POD_NAME as the downward API would set it."""
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    args = [f"--liveness=http://127.0.0.1:{liveness}/healthz" if a.startswith("--liveness=")
            else a for a in container["args"]]
    env = {e["name"]: str(e["value"]) for e in container.get("env") or [] if "value" in e}
    env["POD_NAME"] = f"{deployment['metadata']['name']}-7d9f-abcde"
    env["MQCLUSTER_METRICS_PORT"] = "0"
    return [sys.executable, "-m", "kopf", *args], env


async def test_the_operator_as_the_chart_runs_it_stays_up_and_reconciles(
        kube: Kube, kube_api: KubeApi, kube_namespace: str, helm: Path, procs: Procs,  # noqa: F811
        tmp_path: Path) -> None:
    ns = kube_namespace
    objs = kinds(template(helm, namespace=ns))
    deployment, token = await install_chart_objects(kube, kube_api, ns, objs)
    kubeconfig = token_kubeconfig(kube.kubeconfig, token, tmp_path / "sa-kubeconfig")
    argv, env = operator_command(deployment, free_port())
    env.update(KUBECONFIG=str(kubeconfig), HOME=str(tmp_path), TMPDIR=str(tmp_path))
    operator = procs.spawn(argv, name="operator", env=env)

    await kube_api.create({"apiVersion": "mqcluster.io/v1alpha1", "kind": "Controller",
                           "metadata": {"name": "mqc", "namespace": ns},
                           "spec": {"replicas": 1, "deployment": "EmbeddedInNamesrv"}})
    await kube_api.create({"apiVersion": "mqcluster.io/v1alpha1", "kind": "BrokerGroup",
                           "metadata": {"name": "bg", "namespace": ns},
                           "spec": {"mode": "Controller", "replicas": 2,
                                    "controllerRef": {"name": "mqc"}}})
    bg_path = f"/apis/mqcluster.io/v1alpha1/namespaces/{ns}/brokergroups/bg"
    sts_path = f"/apis/apps/v1/namespaces/{ns}/statefulsets/bg"
    deadline = time.monotonic() + 90
    while True:
        assert operator.poll() is None, (
            f"the operator exited with code {operator.returncode}:\n"
            f"{procs.output(operator)[-3000:]}")
        status = ((await kube_api.get_path(bg_path)) or {}).get("status") or {}
        if await kube_api.get_path(sts_path) and status.get("conditions"):
            break
        assert time.monotonic() < deadline, (
            f"no reconcile: status {status}\n{procs.output(operator)[-3000:]}")
        await asyncio.sleep(0.2)
    # Every watch of kopf has been opened (and re-opened) meanwhile; still up afterwards.
    await asyncio.sleep(3)
    assert operator.poll() is None, procs.output(operator)[-3000:]
    output = procs.output(operator)
    assert "strconv.ParseInt" not in output
    assert "Forbidden" not in output and " 403" not in output, output[-3000:]
    sts = await kube_api.get_path(sts_path)
    assert sts is not None and sts["spec"]["replicas"] == 2
    assert sts["metadata"]["ownerReferences"][0]["kind"] == "BrokerGroup"
