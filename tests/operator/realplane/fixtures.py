"""pytest fixtures of the real control plane (registered by tests/operator/conftest.py)."""

from __future__ import annotations

import re
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from mqcluster_testing.operator.realplane.controlplane import (
    Kube,
    KubeApi,
    control_plane,
    kit_missing,
)
from mqcluster_testing.operator.realplane.mirror import Mirror
from mqcluster_testing.operator.realplane.node_agent import NodeAgent


@pytest.fixture(scope="session")
def kube() -> Iterator[Kube]:
    """One control plane per test session: kube-up once, kube-down at the end (pass or
    fail). Skipped only where the kit is absent."""
    missing = kit_missing()
    if missing:
        pytest.skip(missing)
    with control_plane() as plane:
        yield plane


@pytest.fixture
async def kube_api(kube: Kube) -> AsyncIterator[KubeApi]:
    """A client with the admin's credentials, for the test's own requests."""
    api = kube.api()
    try:
        yield api
    finally:
        await api.close()


@pytest.fixture
async def kube_crds(kube: Kube, kube_api: KubeApi) -> Kube:
    """The CRDs of crds/*.yaml, applied once per control plane and Established."""
    await kube.apply_crds(kube_api)
    return kube


def namespace_for(test_name: str) -> str:
    stem = re.sub(r"[^a-z0-9-]+", "-", test_name.lower()).strip("-")[:40].strip("-")
    return f"{stem or 't'}-{secrets.token_hex(3)}"


@pytest.fixture
async def kube_namespace(kube: Kube, kube_api: KubeApi,
                         request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A fresh namespace (named after the test), deleted afterwards with its pods."""
    name = namespace_for(request.node.name.removeprefix("test_"))
    await kube.create_namespace(kube_api, name)
    try:
        yield name
    finally:
        await kube.delete_namespace(kube_api, name)


@pytest.fixture
async def node_agent(kube_crds: Kube, kube_api: KubeApi, kube_namespace: str,
                     tmp_path: Path) -> AsyncIterator[NodeAgent]:
    """The test kubelet for ``kube_namespace``, started (with the CRDs applied); its
    ``mirror`` holds the namespace's objects. Stopped, its processes killed, at the end."""
    mirror = Mirror(kube_api, kube_namespace)
    await mirror.start()
    agent = NodeAgent(kube_api, mirror, tmp_path / "pods")
    await agent.start()
    try:
        yield agent
    finally:
        try:
            await agent.close()
        finally:
            await mirror.close()
