"""The operator image run with podman as the chart's Deployment runs it, against the real
API server (../shared/kube).

``helm template`` renders the Deployment; its pod becomes a ``podman run`` with the pod's
user and group, the container's read-only root (no tmpfs podman would add), dropped
capabilities and no privilege escalation, its volumes (the tmp emptyDir), its env and
args. What the kubelet adds to every pod is added too: the ServiceAccount's token, CA and
namespace at /var/run/secrets/kubernetes.io/serviceaccount and KUBERNETES_SERVICE_HOST and
_PORT; and as kopf logs in at https://kubernetes.default.svc (the Service's DNS name),
that name resolves to a loopback address where a TCP relay on port 443 stands in for the
Service's virtual IP in front of the API server. The operator must answer the
Deployment's liveness probe, reconcile a Controller and a BrokerGroup, and stay up,
refused nothing.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import random
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from mqcluster_testing.operator.realplane.controlplane import Kube, KubeApi

from .chart_tools import kinds, template
from .test_chart_operator_real import install_chart_objects
from .test_images_run import images, local_image, podman, port  # noqa: F401  (images: fixture)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


@contextlib.asynccontextmanager
async def service_vip(server: str) -> AsyncIterator[str]:
    """A loopback address whose port 443 relays to the API server, as the ``kubernetes``
    Service's virtual IP does in a cluster; yields the address."""
    url = urlsplit(server)
    target = (url.hostname or "127.0.0.1", url.port or 443)

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    for _ in range(50):
        host = f"127.0.0.{random.randint(2, 250)}"
        try:
            server_obj = await asyncio.start_server(relay, host, 443)
        except OSError:
            continue
        break
    else:
        pytest.skip("no loopback address with port 443 free (or no right to bind it)")
    try:
        yield host
    finally:
        server_obj.close()


def service_account_dir(kube: Kube, token: str, namespace: str, dest: Path) -> Path:
    """What the kubelet mounts into a pod of the ServiceAccount."""
    cluster = yaml.safe_load(kube.kubeconfig.read_text())["clusters"][0]["cluster"]
    dest.mkdir()
    if "certificate-authority-data" in cluster:
        ca = base64.b64decode(cluster["certificate-authority-data"])
    else:
        ca = Path(cluster["certificate-authority"]).read_bytes()
    (dest / "ca.crt").write_bytes(ca)
    (dest / "token").write_text(token)
    (dest / "namespace").write_text(namespace)
    for path in dest.iterdir():
        path.chmod(0o644)
    dest.chmod(0o755)
    return dest


def run_args(deployment: dict[str, Any], name: str, work: Path, sa_dir: Path,
             vip: str) -> list[str]:
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    pod_sc, sc = pod.get("securityContext", {}), container.get("securityContext", {})
    args = ["run", "--detach", "--pull=never", "--network=host", "--name", name]
    assert pod_sc.get("runAsNonRoot") and pod_sc.get("runAsUser") not in (None, 0)
    args += ["--user", f"{pod_sc['runAsUser']}:{pod_sc.get('runAsGroup', pod_sc['runAsUser'])}"]
    if sc.get("readOnlyRootFilesystem"):
        args += ["--read-only", "--read-only-tmpfs=false"]
    for cap in sc.get("capabilities", {}).get("drop", []):
        args += ["--cap-drop", cap]
    if sc.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    volumes = {}
    for volume in pod.get("volumes", []):
        assert "emptyDir" in volume, f"volume kind not handled by the test: {volume}"
        path = work / volume["name"]
        path.mkdir()
        path.chmod(0o777)
        volumes[volume["name"]] = path
    for mount in container.get("volumeMounts", []):
        ro = ":ro" if mount.get("readOnly") else ""
        args += ["--volume", f"{volumes[mount['name']]}:{mount['mountPath']}{ro}"]
    args += ["--volume", f"{sa_dir}:{SA_DIR}:ro"]
    args += ["--env", f"KUBERNETES_SERVICE_HOST={vip}", "--env", "KUBERNETES_SERVICE_PORT=443",
             "--add-host", f"kubernetes.default.svc:{vip}"]
    for env in container.get("env", []):
        if "value" in env:
            value = str(env["value"])
        else:
            assert env["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
            value = f"{deployment['metadata']['name']}-7d9f-abcde"
        args += ["--env", f"{env['name']}={value}"]
    if container.get("command"):
        args += ["--entrypoint", json.dumps(container["command"])]
    return [*args, local_image(container["image"]), *container.get("args", [])]


def alive(deployment: dict[str, Any]) -> bool:
    import urllib.request

    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    probe = container["livenessProbe"]["httpGet"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    port = probe["port"] if isinstance(probe["port"], int) else ports[probe["port"]]
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{probe['path']}", timeout=3) as r:
            return bool(r.status == 200)
    except OSError:
        return False


async def test_operator_image_as_the_chart_runs_it_reconciles_on_the_real_api_server(
    images: dict[str, str], kube: Kube, kube_api: KubeApi,  # noqa: F811
    kube_namespace: str, helm: Path, tmp_path: Path,
) -> None:
    ns = kube_namespace
    # Free ports for the liveness and metrics endpoints: the container shares the host's
    # network with everything else on this machine.
    objs = kinds(template(helm, f"operator.livenessPort={port()}",
                          f"metrics.port={port()}", namespace=ns))
    deployment, token = await install_chart_objects(kube, kube_api, ns, objs)
    sa_dir = service_account_dir(kube, token, ns, tmp_path / "serviceaccount")
    name = f"mqimg-operator-{ns}"[:60]
    async with service_vip(kube.server) as vip:
        started = podman(*run_args(deployment, name, tmp_path, sa_dir, vip), check=False)
        assert started.returncode == 0, started.stderr
        await run_and_check(kube_api, ns, deployment, name)


async def run_and_check(kube_api: KubeApi, ns: str, deployment: dict[str, Any],
                        name: str) -> None:
    """Alive, reconciling, still up and refused nothing; the container removed after."""

    def logs() -> str:
        out = podman("logs", name, check=False)
        return (out.stdout + out.stderr)[-4000:]

    def running() -> bool:
        out = podman("inspect", "--format", "{{.State.Running}}", name, check=False)
        return out.stdout.strip() == "true"

    try:
        deadline = time.monotonic() + 60
        while not await asyncio.to_thread(alive, deployment):
            assert running(), f"the operator exited:\n{logs()}"
            assert time.monotonic() < deadline, f"no liveness answer:\n{logs()}"
            await asyncio.sleep(0.5)
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
            assert running(), f"the operator exited:\n{logs()}"
            status = ((await kube_api.get_path(bg_path)) or {}).get("status") or {}
            if await kube_api.get_path(sts_path) and status.get("conditions"):
                break
            assert time.monotonic() < deadline, f"no reconcile: status {status}\n{logs()}"
            await asyncio.sleep(0.2)
        await asyncio.sleep(3)
        assert running() and await asyncio.to_thread(alive, deployment), logs()
        output = logs()
        assert "Forbidden" not in output and " 403" not in output, output
        assert "Read-only file system" not in output, output
        sts = await kube_api.get_path(sts_path)
        assert sts is not None and sts["spec"]["replicas"] == 2
        pod_env = {e["name"]: e.get("value")
                   for e in sts["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert pod_env["HOME"] == pod_env["TMPDIR"] == "/tmp"
    finally:
        podman("rm", "--force", "--time", "2", name, check=False)
