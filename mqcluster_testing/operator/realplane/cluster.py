"""The real control plane as kopf_harness's ``Cluster``: ``running_operator(cluster=...)``
runs the operator in-process (kopf in its own thread, the test intervals) against it,
with the admin's credentials; tests read objects from the node agent's mirror."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from ..kopf_harness import Cluster
from .controlplane import TEST_CLIENT, Kube
from .mirror import Mirror


def real_cluster(kube: Kube, mirror: Mirror) -> Cluster:
    """Close ``cluster.api`` when done."""
    return Cluster(mirror, kube.server, kube.api(user_agent=TEST_CLIENT),
                   connection=kube.connection())


@contextlib.asynccontextmanager
async def kube_cluster(kube: Kube, ns: str) -> AsyncIterator[Cluster]:
    """The real control plane as the harness's cluster, the objects of ``ns`` mirrored
    (for tests without a node agent, whose pods stay Pending)."""
    api = kube.api()
    mirror = Mirror(api, ns)
    await mirror.start()
    plane = real_cluster(kube, mirror)
    try:
        yield plane
    finally:
        await mirror.close()
        await plane.api.close()
        await api.close()
