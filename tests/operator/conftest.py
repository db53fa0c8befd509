from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def load_examples() -> list[dict[str, Any]]:
    """The Controller and BrokerGroup manifests among ``examples/*.yaml``."""
    docs: list[dict[str, Any]] = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        docs.extend(
            d for d in yaml.safe_load_all(path.read_text())
            if isinstance(d, dict) and str(d.get("apiVersion", "")).startswith("mqcluster.io/")
        )
    return docs


@pytest.fixture
def examples() -> list[dict[str, Any]]:
    return load_examples()


@pytest.fixture(scope="session")
def helm() -> Path:
    from .chart_tools import helm_binary

    return helm_binary()


# The real control plane (../shared/kube): kube, kube_api, kube_crds, kube_namespace,
# node_agent; see tests/operator/realplane/__init__.py.
from .realplane.fixtures import (  # noqa: E402
    kube,
    kube_api,
    kube_crds,
    kube_namespace,
    node_agent,
)

__all__ = ["kube", "kube_api", "kube_crds", "kube_namespace", "node_agent"]
