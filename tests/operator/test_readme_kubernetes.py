"""The README's "On Kubernetes" section, run as written on the real control plane.

The commands are parsed out of the section in README.md and run in order with the real
kubectl and helm, the user's current namespace being the test's. What a kubelet would do, the node
agent does; the operator's pod (which no kubelet runs here) is played by the operator run
in-process with the same handlers. Two commands need a kubelet's streams and are carried
out as they would act: ``kubectl exec svc/broker-a -- CMD`` runs CMD against the pod the
Service selects, and the Python client reaches that pod's address for ``broker-a:8081``.
"""

from __future__ import annotations

import asyncio
import re
import select
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

# The real control plane's test support (tests/operator/realplane: fixtures, node agent).
pytest.importorskip("mqcluster_testing.operator.realplane.controlplane",
                    reason="tests/operator/realplane is not in this checkout")
from mqcluster_testing.operator.real_operator import BG, OperatorRun, operator_on
from mqcluster_testing.operator.realplane.controlplane import Kube
from mqcluster_testing.operator.realplane.node_agent import NodeAgent

pytestmark = [pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
HEADING = "## On Kubernetes"
RELEASE_NS = "mqcluster-system"


def section() -> str:
    """The README's section, up to the next heading."""
    rest = (REPO / "README.md").read_text().split(HEADING, 1)[1]
    return HEADING + rest.split("\n## ", 1)[0]


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def commands(text: str) -> list[str]:
    """Every shell command of the section's ``sh`` blocks, continuation lines joined."""
    out = []
    for block in blocks(text, "sh"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip()
            if line and not line.startswith("#"):
                out.append(line)
    return out


def test_the_section_holds_the_path_from_helm_install_to_a_failover() -> None:
    cmds = commands(section())
    starts = [c.split()[:2] for c in cmds]
    assert ["helm", "install"] in starts and ["kubectl", "describe"] in starts
    assert "kubectl get bg -w" in cmds
    assert any(c.startswith("kubectl delete pod") for c in cmds)
    assert blocks(section(), "python"), "the official client's example"


class Shell:
    def __init__(self, kube: Kube, kubeconfig: Path, helm: Path) -> None:
        self.env = kube.env(kubeconfig)
        self.bins = {"helm": str(helm), "kubectl": str(helm.parent / "kubectl")}

    def argv(self, command: str) -> list[str]:
        argv = shlex.split(command)
        return [self.bins.get(argv[0], argv[0]), *argv[1:]]

    def run(self, command: str, timeout: float = 180) -> str:
        result = subprocess.run(self.argv(command), capture_output=True, text=True,
                                env=self.env, cwd=REPO, timeout=timeout)
        assert result.returncode == 0, f"{command}:\n{result.stdout}\n{result.stderr}"
        return result.stdout

    def watch_until(self, command: str, pattern: str, timeout: float = 300) -> list[str]:
        """Lines of a ``-w`` command until one matches ``pattern``."""
        proc = subprocess.Popen(self.argv(command), stdout=subprocess.PIPE, text=True,
                                env=self.env, cwd=REPO)
        lines: list[str] = []
        deadline = time.monotonic() + timeout
        try:
            assert proc.stdout is not None
            while (left := deadline - time.monotonic()) > 0:
                if not select.select([proc.stdout], [], [], left)[0]:
                    break  # nothing printed before the deadline
                line = proc.stdout.readline()
                if not line:
                    break
                lines.append(line.rstrip())
                if re.search(pattern, line):
                    return lines
        finally:
            proc.terminate()
            proc.wait(10)
        raise AssertionError(f"{command} never printed {pattern!r}:\n" + "\n".join(lines))


def selected_pod(run: OperatorRun, service: str) -> str | None:
    """The pod a Service selects (Endpoints refuse the agent's loopback addresses)."""
    svc = run.obj("v1/services", service) or {}
    selector = (svc.get("spec") or {}).get("selector") or {}
    pods = [p["metadata"]["name"] for p in run.agent.mirror.all("v1/pods")
            if selector and all((p["metadata"].get("labels") or {}).get(k) == v
                                for k, v in selector.items())]
    return pods[0] if len(pods) == 1 else None


async def until(check: Any, what: str, timeout: float = 300) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = await asyncio.to_thread(check)
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.5)


async def test_the_readme_kubernetes_section_runs_as_written(
        kube_crds: Kube, node_agent: NodeAgent, helm: Path, tmp_path: Path) -> None:
    kube, ns = kube_crds, node_agent.namespace
    kubeconfig = tmp_path / "kubeconfig"
    shutil.copy(kube.kubeconfig, kubeconfig)
    sh = Shell(kube, kubeconfig, helm)
    sh.run(f"kubectl config set-context --current --namespace={ns}")
    text = section()
    client = blocks(text, "python")[0]
    seen: dict[str, Any] = {}
    async with operator_on(kube, node_agent) as run:
        try:
            for command in commands(text):
                await step(sh, run, command, client, seen)
        finally:
            subprocess.run(sh.argv(f"helm uninstall mqcluster-operator -n {RELEASE_NS}"),
                           env=sh.env, capture_output=True, timeout=120)
            subprocess.run(sh.argv(f"kubectl delete namespace {RELEASE_NS} --wait=false"),
                           env=sh.env, capture_output=True, timeout=60)
    assert seen.keys() >= {"watched", "sent", "described"}


async def step(sh: Shell, run: OperatorRun, command: str, client: str,
               seen: dict[str, Any]) -> None:
    if command == "kubectl get bg -w":
        try:
            lines = await asyncio.to_thread(sh.watch_until, command,
                                            r"^broker-a\s+Controller\s+3\s+broker-a-\d\s+\d+\s+True\s")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{run.describe()}") from None
        assert lines[0].split()[:3] == ["NAME", "MODE", "REPLICAS"]
        seen["watched"] = lines
    elif command.startswith("kubectl exec svc/broker-a -- "):
        pod = await until(lambda: selected_pod(run, "broker-a"), "the client Service's pod")
        local = command.split(" -- ", 1)[1].replace(
            "127.0.0.1:10911", f"{run.agent.ip_of(pod)}:10911")
        argv = shlex.split(local)
        argv[0] = str(Path(sys.executable).parent / argv[0])
        await until(lambda: subprocess.run(argv, capture_output=True, timeout=60)
                    .returncode == 0, f"{local} to succeed", timeout=120)
        python = client.replace("broker-a:8081", f"{run.agent.ip_of(pod)}:8081")
        result = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-c", python], capture_output=True, text=True,
            timeout=120)
        assert result.returncode == 0, result.stderr[-2000:]
        seen["sent"] = result.stdout
    elif command.startswith("kubectl delete pod"):
        seen["old master"] = run.status(BG, "broker-a")["masterPod"]
        await asyncio.to_thread(sh.run, command)
    elif command == "kubectl describe bg broker-a":
        old = seen["old master"]

        last: list[str] = [""]

        def described() -> str | None:
            last[0] = out = sh.run(command)
            return out if f"from {old} to" in out and "MasterChanged" in out else None

        try:
            out = await until(described, "the failover in kubectl describe")
        except AssertionError as exc:
            raise AssertionError(f"{exc} (old master {old}):\n{last[0]}\n{run.describe()}"
                                 ) from None
        for cond in ("Ready", "MasterElected", "Progressing"):
            assert re.search(rf"Type:\s+{cond}", out), out
        seen["described"] = out
    else:
        out = await asyncio.to_thread(sh.run, command)
        if command.startswith("kubectl get events"):
            assert "MasterChanged" in out
