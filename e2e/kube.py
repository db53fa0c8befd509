"""A kind cluster driven with the kind, docker, kubectl and helm binaries."""

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


def missing_tools() -> str | None:
    """Why the suite cannot run here (None: it can)."""
    for tool in ("docker", "kind", "kubectl", "helm"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH"
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
        return run("kubectl", "--kubeconfig", str(self.kubeconfig), "-n", self.namespace,
                   *args, timeout=timeout, input=input)

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


def build_images(tag: str) -> None:
    run("docker", "build", "-f", str(REPO / "broker_image/Dockerfile"),
        "-t", f"{BROKER_IMAGE}:{tag}", str(REPO), timeout=1800)
    run("docker", "build", "-f", str(REPO / "operator/Dockerfile"),
        "-t", f"{OPERATOR_IMAGE}:{tag}", str(REPO), timeout=1800)


def create_cluster(name: str, kubeconfig: Path) -> None:
    run("kind", "create", "cluster", "--name", name, "--kubeconfig", str(kubeconfig),
        "--wait", "180s", timeout=900)


def delete_cluster(name: str) -> None:
    subprocess.run(["kind", "delete", "cluster", "--name", name], capture_output=True,
                   timeout=300)


def load_image(cluster: str, image: str) -> None:
    run("kind", "load", "docker-image", image, "--name", cluster, timeout=900)


def helm_install(kube: Kube, tag: str) -> None:
    run("helm", "--kubeconfig", str(kube.kubeconfig), "install", "mqcluster", str(CHART),
        "--namespace", kube.namespace, "--create-namespace",
        "--set", f"image.repository={OPERATOR_IMAGE}", "--set", f"image.tag={tag}",
        "--wait", "--timeout", "5m", timeout=600)
