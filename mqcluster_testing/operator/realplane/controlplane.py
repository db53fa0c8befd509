"""The real control plane of ``../shared/kube`` (etcd, kube-apiserver and
kube-controller-manager v1.36 on loopback) for tests: start and stop, credentials,
namespaces, the CRDs, ServiceAccount tokens, and an API client with the raw calls
(watch, bindings, cluster-scoped objects) that the operator's ``Api`` does not need."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import kopf
import yaml

from mqcluster_operator.k8s import APPLY_PATCH, Api, ApiError

REPO = Path(__file__).resolve().parents[3]
KIT = REPO.parent / "shared" / "kube"
CRDS = REPO / "crds"
TEST_CLIENT = "mqcluster-tests"
"""The user agent (and field manager) of the tests' own writes."""


def kit_missing() -> str | None:
    """Why the real control plane cannot run here, or None."""
    if not (KIT / "kube-up").is_file():
        return f"the Kubernetes test kit is absent ({KIT}/kube-up): a checkout without ../shared"
    return None


class KubeApi(Api):
    """``Api`` plus raw requests and watches, for the tests and the node agent."""

    async def request(
        self, method: str, path: str, body: Any = None, params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Any:
        return await self._call(method, path, body=body, params=params,
                                content_type=content_type)

    async def get_path(self, path: str) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = await self.request("GET", path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return result

    async def delete_path(self, path: str, **params: str) -> bool:
        try:
            await self.request("DELETE", path, params=params)
        except ApiError as exc:
            if exc.status in (404, 409):  # gone, or a precondition (uid) no longer holds
                return False
            raise
        return True

    async def watch(
        self, path: str, resource_version: str, timeout_seconds: int = 240,
    ) -> AsyncIterator[dict[str, Any]]:
        """The events of one watch request from ``resource_version`` (ends when the
        server closes it); a 410 Gone ends with an ``ERROR`` event the caller relists on."""
        client = self._get_client()
        params = [("watch", "true"), ("resourceVersion", resource_version),
                  ("allowWatchBookmarks", "true"), ("timeoutSeconds", str(timeout_seconds))]
        response = await client.call_api(
            path, "GET", query_params=params, header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"], _preload_content=False,
            _request_timeout=timeout_seconds + 30)
        resp = response[0] if isinstance(response, tuple) else response
        try:
            async for line in resp.content:
                if line.strip():
                    yield json.loads(line)
        finally:
            resp.release()


def connection_of(kubeconfig: Path) -> kopf.ConnectionInfo:
    """kopf's credentials from the kit's kubeconfig (the admin's client certificate)."""
    config = yaml.safe_load(kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    return kopf.ConnectionInfo(
        server=cluster["server"], ca_data=cluster.get("certificate-authority-data"),
        certificate_data=user.get("client-certificate-data"),
        private_key_data=user.get("client-key-data"), token=user.get("token"),
        default_namespace="default",
    )


def token_kubeconfig(source: Path, token: str, dest: Path) -> Path:
    """A kubeconfig for the same server as ``source`` that authenticates with ``token``
    (a ServiceAccount's, as a pod's mounted token would)."""
    config = yaml.safe_load(source.read_text())
    cluster = config["clusters"][0]
    dest.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": cluster["name"], "user": "sa"}}],
        "current-context": "sa",
    }))
    dest.chmod(0o600)
    return dest


@dataclass
class Kube:
    """A running control plane: ``kubeconfig`` (the admin's), ``env()`` for subprocesses
    (kubectl, helm, the operator), ``api()`` for a client of the tests' own."""

    dir: Path
    kubeconfig: Path
    crds_applied: bool = False
    _lock: asyncio.Lock | None = field(default=None, repr=False)

    def env(self, kubeconfig: Path | None = None) -> dict[str, str]:
        return {**os.environ, "KUBECONFIG": str(kubeconfig or self.kubeconfig)}

    def connection(self) -> kopf.ConnectionInfo:
        return connection_of(self.kubeconfig)

    def api(self, user_agent: str = TEST_CLIENT) -> KubeApi:
        """A new client with the admin's credentials (close it when done)."""
        return KubeApi(self.connection(), timeout=30.0, user_agent=user_agent)

    def operator_api(self) -> Api:
        """The operator's own client class, as kopf's login would configure it."""
        return Api(self.connection())

    @property
    def server(self) -> str:
        return str(self.connection().server)

    async def apply_crds(self, api: KubeApi) -> None:
        """Server-side applies ``crds/*.yaml`` once per control plane and waits until the
        API server serves them (``Established``)."""
        if self.crds_applied:
            return
        base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        crds = [yaml.safe_load(p.read_text()) for p in sorted(CRDS.glob("*.yaml"))]
        for crd in crds:
            await api.request("PATCH", f"{base}/{crd['metadata']['name']}", body=crd,
                              content_type=APPLY_PATCH,
                              params={"fieldManager": TEST_CLIENT, "force": "true"})
        for crd in crds:
            for _ in range(200):
                live = await api.get_path(f"{base}/{crd['metadata']['name']}") or {}
                if any(c["type"] == "Established" and c["status"] == "True"
                       for c in (live.get("status") or {}).get("conditions") or []):
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError(f"CRD {crd['metadata']['name']} never became Established")
            # Established comes before the watch cache has the type: 429 "storage is
            # (re)initializing" until then.
            group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
            version = crd["spec"]["versions"][0]["name"]
            for _ in range(200):
                try:
                    await api.request("GET", f"/apis/{group}/{version}/{plural}",
                                      params={"limit": "1"})
                    break
                except ApiError as exc:
                    if exc.status != 429:
                        raise
                await asyncio.sleep(0.05)
        self.crds_applied = True

    async def create_namespace(self, api: KubeApi, name: str) -> None:
        await api.request("POST", "/api/v1/namespaces", body={
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        # The controller manager's ServiceAccount controller makes "default" shortly after;
        # pods of the StatefulSet controller need it (the ServiceAccount admission plugin).
        for _ in range(200):
            if await api.get_path(f"/api/v1/namespaces/{name}/serviceaccounts/default"):
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"namespace {name} got no default ServiceAccount")

    async def delete_namespace(self, api: KubeApi, name: str) -> None:
        """Deletes the namespace and force-deletes its pods: bound pods stay Terminating
        until a kubelet finalizes them, which would hold the namespace."""
        await api.delete_path(f"/api/v1/namespaces/{name}")
        for _ in range(2):  # the namespace controller may start a graceful deletion late
            pods = await api.request("GET", f"/api/v1/namespaces/{name}/pods")
            for pod in pods.get("items", []):
                await api.delete_path(
                    f"/api/v1/namespaces/{name}/pods/{quote(pod['metadata']['name'])}",
                    gracePeriodSeconds="0")
            if not pods.get("items"):
                return
            await asyncio.sleep(0.5)

    async def service_account_token(self, api: KubeApi, namespace: str, account: str,
                                     seconds: int = 3600) -> str:
        """A bound token of ``account`` (TokenRequest), as the kubelet would mount it."""
        answer = await api.request(
            "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                  "spec": {"expirationSeconds": seconds}})
        return str(answer["status"]["token"])


def kube_up(directory: Path) -> Kube:
    """Starts a control plane in ``directory`` (a leftover one is stopped first)."""
    kube_down(directory)
    try:
        result = subprocess.run([str(KIT / "kube-up"), str(directory)], check=True,
                                capture_output=True, text=True, timeout=180)
    except subprocess.CalledProcessError as exc:
        raise RuntimeError(f"kube-up failed (exit {exc.returncode}):\n{exc.stderr}") from None
    last = result.stdout.strip().splitlines()[-1]
    key, _, path = last.partition("=")
    if key != "KUBECONFIG":
        raise RuntimeError(f"kube-up printed no kubeconfig: {result.stdout[-500:]}")
    return Kube(directory, Path(path))


def kube_down(directory: Path) -> None:
    if directory.exists():
        subprocess.run([str(KIT / "kube-down"), str(directory)], check=False,
                       capture_output=True, text=True, timeout=60)


@contextlib.contextmanager
def control_plane(parent: Path | None = None) -> Any:
    """kube-up in a new directory (on tmpfs where there is one: etcd fsyncs), always
    kube-down and removed afterwards."""
    shm = Path("/dev/shm")
    base = parent or (shm if shm.is_dir() and os.access(shm, os.W_OK) else None)
    directory = Path(tempfile.mkdtemp(prefix="mq-kube-", dir=base))
    try:
        yield kube_up(directory)
    finally:
        kube_down(directory)
        shutil.rmtree(directory, ignore_errors=True)
