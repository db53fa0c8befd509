"""The real control plane as kopf_harness's ``Cluster``: ``running_operator(cluster=...)``
runs the operator in-process (kopf in its own thread, the test intervals) against it,
with the admin's credentials; tests read objects from the node agent's mirror."""

from __future__ import annotations

from ..kopf_harness import Cluster
from .controlplane import TEST_CLIENT, Kube
from .mirror import Mirror


def real_cluster(kube: Kube, mirror: Mirror) -> Cluster:
    """Close ``cluster.api`` when done."""
    return Cluster(mirror, kube.server, kube.api(user_agent=TEST_CLIENT),
                   connection=kube.connection())
