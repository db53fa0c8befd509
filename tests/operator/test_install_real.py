"""Installing the chart on a real API server (../shared/kube) with the real ``helm``.

The documented order (README "On Kubernetes"): ``kubectl apply --server-side -f crds/``
then ``helm install``, or ``helm install`` alone. CRDs created outside the release are
left out of it (helm would refuse to adopt them: "invalid ownership metadata"), and
adopting them into the release is two commands. ``replicaCount=0`` installs everything
but the operator's pod.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

# The real control plane's test support (tests/operator/realplane: fixtures, node agent).
pytest.importorskip("mqcluster_testing.operator.realplane.controlplane",
                    reason="tests/operator/realplane is not in this checkout")
from mqcluster_testing.operator.realplane.controlplane import Kube

from .chart_tools import CHART, kinds

pytestmark = [pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
CRDS = ("brokergroups.mqcluster.io", "controllers.mqcluster.io")


def kubectl_binary(helm: Path) -> str:
    return str(helm.parent / "kubectl")


def sh(kube: Kube, *cmd: str) -> str:
    result = subprocess.run(list(cmd), capture_output=True, text=True, timeout=180,
                            env=kube.env(), cwd=REPO)
    assert result.returncode == 0, f"{' '.join(cmd)}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def manifest(kube: Kube, helm: Path, release: str, ns: str) -> dict[str, list[dict[str, Any]]]:
    text = sh(kube, str(helm), "get", "manifest", release, "-n", ns)
    return kinds([d for d in yaml.safe_load_all(text) if d])


def crd_release(kube: Kube, helm: Path, name: str) -> str | None:
    out = sh(kube, kubectl_binary(helm), "get", "crd", name, "-o", "yaml")
    annotations = yaml.safe_load(out)["metadata"].get("annotations") or {}
    return annotations.get("meta.helm.sh/release-name")


async def test_helm_install_after_kubectl_apply_of_the_crds_with_the_operator_scaled_to_zero(
        kube_crds: Kube, kube_namespace: str, helm: Path) -> None:
    kube, ns, release = kube_crds, kube_namespace, f"op-{kube_namespace[-6:]}"
    kubectl = kubectl_binary(helm)
    sh(kube, kubectl, "apply", "--server-side", "-f", "crds/")
    out = sh(kube, str(helm), "install", release, str(CHART), "-n", ns,
             "--set", "replicaCount=0", "--wait", "--timeout", "120s")
    assert "These CRDs were already in the cluster and stay outside the release" in out
    assert "scaled to zero" in out
    objs = manifest(kube, helm, release, ns)
    names = {c["metadata"]["name"] for c in objs.get("CustomResourceDefinition", [])}
    assert not names & set(CRDS)
    (deploy,) = objs["Deployment"]
    assert deploy["spec"]["replicas"] == 0
    live = yaml.safe_load(sh(kube, kubectl, "-n", ns, "get", "deploy",
                             deploy["metadata"]["name"], "-o", "yaml"))
    assert live["spec"]["replicas"] == 0
    # an upgrade keeps them out; the CRDs stay when the release goes
    sh(kube, str(helm), "upgrade", release, str(CHART), "-n", ns, "--set", "replicaCount=0")
    sh(kube, str(helm), "uninstall", release, "-n", ns)
    for crd in CRDS:
        sh(kube, kubectl, "get", "crd", crd)


async def test_crds_applied_by_kubectl_are_adopted_into_the_release(
        kube_crds: Kube, kube_namespace: str, helm: Path) -> None:
    kube, ns, release = kube_crds, kube_namespace, f"own-{kube_namespace[-6:]}"
    kubectl = kubectl_binary(helm)
    try:
        sh(kube, kubectl, "label", "crd", *CRDS, "app.kubernetes.io/managed-by=Helm",
           "--overwrite")
        sh(kube, kubectl, "annotate", "crd", *CRDS, f"meta.helm.sh/release-name={release}",
           f"meta.helm.sh/release-namespace={ns}", "--overwrite")
        out = sh(kube, str(helm), "install", release, str(CHART), "-n", ns,
                 "--set", "replicaCount=0")
        outside = [line for line in out.splitlines() if "stay outside the release" in line]
        assert not any(crd in line for line in outside for crd in CRDS), outside
        names = {c["metadata"]["name"]
                 for c in manifest(kube, helm, release, ns)["CustomResourceDefinition"]}
        assert set(CRDS) <= names
        assert all(crd_release(kube, helm, crd) == release for crd in CRDS)
        sh(kube, str(helm), "uninstall", release, "-n", ns)
        for crd in CRDS:  # crds.keep: every Controller and BrokerGroup survives
            sh(kube, kubectl, "get", "crd", crd)
    finally:  # outside any release again, as the other tests expect
        subprocess.run([kubectl, "annotate", "crd", *CRDS, "meta.helm.sh/release-name-",
                        "meta.helm.sh/release-namespace-"], env=kube.env(),
                       capture_output=True, timeout=60)


async def test_a_second_release_leaves_the_first_ones_crds_alone(
        kube_crds: Kube, kube_namespace: str, helm: Path) -> None:
    """The kopf peering CRD of an earlier release (kept on uninstall) is another release's:
    left out, not refused."""
    kube, ns = kube_crds, kube_namespace
    for release in (f"a-{ns[-6:]}", f"b-{ns[-6:]}"):
        sh(kube, str(helm), "install", release, str(CHART), "-n", ns, "--set", "replicaCount=0")
        sh(kube, str(helm), "uninstall", release, "-n", ns)
