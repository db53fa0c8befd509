"""A cluster driven with the kubectl and helm binaries: a kind cluster made here (kind,
docker), or any existing one given by its kubeconfig with images from a registry."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "charts" / "mqcluster-operator"
BROKER_IMAGE = "mqcluster/broker"
OPERATOR_IMAGE = "mqcluster/operator"
TOOLS = REPO / ".tools" / "bin"  # python tools/kube_binaries.py puts kubectl and helm here


def tool(name: str) -> str | None:
    """``name`` on PATH, else from .tools/bin."""
    found = shutil.which(name)
    if found is None and (TOOLS / name).is_file():
        found = str(TOOLS / name)
    return found


@dataclass(frozen=True)
class Images:
    """The images the suite runs: the broker image at ``tag`` (and at ``upgrade_tag``, which
    the upgrade test rolls to) and the operator image."""

    broker: str = BROKER_IMAGE
    tag: str = "e2e"
    upgrade_tag: str = "e2e-next"
    operator: str = OPERATOR_IMAGE
    operator_tag: str = "e2e"

    def broker_ref(self, tag: str | None = None) -> str:
        return f"{self.broker}:{tag or self.tag}"


def split_ref(ref: str, default_tag: str) -> tuple[str, str]:
    """``repo[:tag]`` (a registry host may have a port: only a colon after the last slash
    starts the tag)."""
    repo, sep, tag = ref.rpartition(":")
    if sep and "/" not in tag and repo:
        return repo, tag
    return ref, default_tag


def images_from(registry: str | None, broker: str | None, operator: str | None,
                tag: str | None, upgrade_tag: str | None) -> Images:
    """From the options: ``--image-registry REG`` names REG/mqcluster/broker and
    REG/mqcluster/operator; ``--broker-image`` and ``--operator-image`` (``repo[:tag]``)
    override either; ``--image-tag`` and ``--upgrade-tag`` the tags."""
    base = Images()
    prefix = registry.rstrip("/") + "/" if registry else ""
    broker_repo, broker_tag = split_ref(broker or prefix + BROKER_IMAGE, tag or base.tag)
    operator_repo, operator_tag = split_ref(operator or prefix + OPERATOR_IMAGE,
                                            tag or base.operator_tag)
    return Images(broker_repo, broker_tag, upgrade_tag or base.upgrade_tag,
                  operator_repo, operator_tag)


def missing_tools(kind: bool = True) -> str | None:
    """Why the suite cannot run here (None: it can); ``kind``: make the cluster here."""
    for name in ("docker", "kind", "kubectl", "helm") if kind else ("kubectl", "helm"):
        if tool(name) is None:
            return f"{name} is not on PATH (nor in .tools/bin: python tools/kube_binaries.py)"
    if not kind:
        return None
    probe = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"no Docker engine answers `docker info`: {probe.stderr.strip()[:200]}"
    return None


def run(*cmd: str, timeout: float = 600, input: str | None = None) -> str:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stderr}")
    return result.stdout


def wait_for(what: str, check: Callable[[], Any], timeout: float = 300,
             interval: float = 1.0) -> Any:
    """Poll ``check`` until it returns something truthy; the cluster is real, so this
    is a poll with a deadline, named for the error message."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # the API server or a pod not ready yet
            last = exc
        time.sleep(interval)
    raise TimeoutError(f"{what} within {timeout:.0f} s (last error: {last})")


@dataclass
class Kube:
    cluster: str
    namespace: str = "mq-e2e"
    kubeconfig: Path = field(default_factory=lambda: Path("kubeconfig"))

    def kubectl(self, *args: str, timeout: float = 120, input: str | None = None) -> str:
        return run(tool("kubectl") or "kubectl", "--kubeconfig", str(self.kubeconfig),
                   "-n", self.namespace, *args, timeout=timeout, input=input)

    def get(self, kind: str, name: str) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.kubectl("get", kind, name, "-o", "json"))
        return out

    def apply(self, manifest: str) -> None:
        self.kubectl("apply", "-f", "-", input=manifest)

    def events(self, reason: str) -> list[dict[str, Any]]:
        items = json.loads(self.kubectl("get", "events", "-o", "json"))["items"]
        return [e for e in items if e.get("reason") == reason]

    def condition(self, kind: str, name: str, ctype: str) -> dict[str, Any] | None:
        conds = self.get(kind, name).get("status", {}).get("conditions", [])
        return next((c for c in conds if c.get("type") == ctype), None)


def build_images(images: Images) -> None:
    run("docker", "build", "-f", str(REPO / "broker_image/Dockerfile"),
        "-t", images.broker_ref(), str(REPO), timeout=1800)
    run("docker", "build", "-f", str(REPO / "operator/Dockerfile"),
        "-t", f"{images.operator}:{images.operator_tag}", str(REPO), timeout=1800)


def create_cluster(name: str, kubeconfig: Path) -> None:
    run("kind", "create", "cluster", "--name", name, "--kubeconfig", str(kubeconfig),
        "--wait", "180s", timeout=900)


def delete_cluster(name: str) -> None:
    subprocess.run(["kind", "delete", "cluster", "--name", name], capture_output=True,
                   timeout=300)


def load_image(cluster: str, image: str) -> None:
    run("kind", "load", "docker-image", image, "--name", cluster, timeout=900)


RELEASE = "mqcluster-e2e"


def helm_install(kube: Kube, images: Images) -> None:
    """Installs (or upgrades) the chart into ``kube.namespace``; CRDs the cluster already
    has from outside a release are left as they are (the chart's documented order)."""
    run(tool("helm") or "helm", "--kubeconfig", str(kube.kubeconfig), "upgrade", "--install",
        RELEASE, str(CHART), "--namespace", kube.namespace, "--create-namespace",
        "--set", f"image.repository={images.operator}",
        "--set", f"image.tag={images.operator_tag}",
        "--wait", "--timeout", "5m", timeout=600)


def helm_uninstall(kube: Kube) -> None:
    """The release and the namespace of the suite's objects (the CRDs stay: crds.keep)."""
    subprocess.run([tool("helm") or "helm", "--kubeconfig", str(kube.kubeconfig), "uninstall",
                    RELEASE, "--namespace", kube.namespace, "--wait"],
                   capture_output=True, timeout=600)
    subprocess.run([tool("kubectl") or "kubectl", "--kubeconfig", str(kube.kubeconfig),
                    "delete", "namespace", kube.namespace, "--wait=false"],
                   capture_output=True, timeout=120)
