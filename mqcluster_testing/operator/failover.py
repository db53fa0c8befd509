"""A failover followed by the operator, with real controllers and stand-in brokers.

Controllers are real ``mqcontroller`` processes; brokers are
``StandInBroker``s (register and heartbeat through the real protocol) bound to
127.0.0.x, the IPs of their pods, which the test creates on the real control plane
(Ready, with those IPs, through the status subresource; the StatefulSet the operator
makes adopts them). Closing the master stand-in makes the controllers elect the slave;
the operator, running against the real API server with the real
``RemotingControllerProbe``, relabels the pods.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqcluster_operator import names
from mqcluster_operator.follow.election_probes import ProbeTarget, RemotingControllerProbe
from mqcluster_operator.k8s import Ref
from mqcluster_testing.controller.localcluster import LocalControllerCluster
from mqcluster_testing.controller.standin import StandInBroker

from .kopf_harness import Harness, running_operator
from .realplane.cluster import kube_cluster
from .realplane.controlplane import Kube

CLUSTER = "DefaultCluster"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class Scenario:
    h: Harness
    controllers: LocalControllerCluster
    ns: str
    workdir: Path

    def role(self, pod: str) -> str | None:
        meta = (self.h.obj("v1/pods", pod, self.ns) or {}).get("metadata", {})
        return (meta.get("labels") or {}).get(names.LABEL_ROLE)

    def pod(self, group: str, ordinal: int, ip: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{group}-{ordinal}", "namespace": self.ns, "labels": {
                names.LABEL_NAME: "mqcluster-broker", names.LABEL_INSTANCE: group,
                names.LABEL_COMPONENT: "broker"}},
            "spec": {"containers": [{"name": "broker", "image": "mqcluster/broker:0.1.0"}]},
            "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                       "conditions": [{"type": "Ready", "status": "True"}]},
        }

    async def create_pod(self, group: str, ordinal: int, ip: str) -> None:
        """The pod, then its status (the API server ignores a status sent on create)."""
        pod = self.pod(group, ordinal, ip)
        await self.h.api.create(pod)
        await self.h.api.patch(Ref("v1", "Pod", self.ns, pod["metadata"]["name"]),
                               {"status": pod["status"]}, "status")

    async def group(self, name: str, first_ip: int) -> tuple[StandInBroker, StandInBroker]:
        """A BrokerGroup with a master and an in-sync slave stand-in; master is pod 0."""
        ips = [f"127.0.0.{first_ip}", f"127.0.0.{first_ip + 1}"]
        brokers = [
            StandInBroker(self.controllers.controller_addr, CLUSTER, name,
                          self.workdir / name / str(i), host=ip, epoch=1,
                          heartbeat_interval=0.3, heartbeat_timeout_ms=1500)
            for i, ip in enumerate(ips)
        ]
        for i, ip in enumerate(ips):
            await self.create_pod(name, i, ip)
        reg = await brokers[0].start()
        await brokers[1].start()
        await brokers[1].client.alter_sync_state_set(
            name, brokers[0].broker_id, reg.replica_info.master_epoch,
            {brokers[0].broker_id, brokers[1].broker_id}, reg.replica_info.sync_state_set_epoch,
        )
        await self.h.api.create({
            "apiVersion": "mqcluster.io/v1alpha1", "kind": "BrokerGroup",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": {"mode": "Controller", "replicas": 2, "controllerRef": {"name": "mqc"}},
        })
        return brokers[0], brokers[1]

    async def failover_seconds(self, name: str, master: StandInBroker) -> float:
        """Close the master stand-in; seconds until the other pod is labelled master."""
        await self.h.eventually(lambda: self.role(f"{name}-0") == "master",
                                what=f"{name}-0 master")
        started = time.monotonic()
        await master.close()
        await self.h.eventually(lambda: self.role(f"{name}-1") == "master",
                                what=f"{name}-1 master after failover")
        return time.monotonic() - started


@contextlib.asynccontextmanager
async def failover_scenario(
    workdir: Path, kube: Kube, ns: str, controllers: int = 1,
) -> AsyncIterator[Scenario]:
    """On the real control plane ``kube`` (CRDs applied), in namespace ``ns``."""
    addrs = [f"127.0.0.{10 + i}:{free_port(f'127.0.0.{10 + i}')}" for i in range(controllers)]
    cluster = LocalControllerCluster(
        addrs, workdir / "controllers", options={"scanNotActiveBrokerInterval": "200"},
    )
    real = list(addrs)

    def factory(target: ProbeTarget) -> RemotingControllerProbe:
        return RemotingControllerProbe(real, timeout=1.0)

    cluster.start_all()
    try:
        await cluster.wait_active(timeout=30)
        async with kube_cluster(kube, ns) as plane, \
                running_operator(probe_factory=factory, cluster=plane) as h:
            await h.api.create({
                "apiVersion": "mqcluster.io/v1alpha1", "kind": "Controller",
                "metadata": {"name": "mqc", "namespace": ns},
                "spec": {"replicas": controllers},
            })
            yield Scenario(h, cluster, ns, workdir)
    finally:
        cluster.kill_all()

