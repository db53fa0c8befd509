"""The proxy tier on the real control plane: a Controller with ``spec.proxy`` renders a
Deployment of two mqproxy pods (run as processes by the node agent) behind its client
Service; the official client, connected to the Service, keeps sending through a master
SIGSTOP, a master SIGKILL, a proxy pod's SIGKILL and a rolling update of the proxies
(none of its sends failing then), and every acknowledged message is read back by id.

There is no kube-proxy here: ``ServiceAddress`` plays the Service's virtual IP as
kube-proxy's iptables rules do, each new connection to one of the ready, not
terminating pods the Service selects, at random."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from rocketmq import FilterExpression, SimpleConsumer

from mqcluster.client.admin import AdminClient
from mqcluster_operator.k8s import Ref
from mqcluster_testing.operator.realplane.controlplane import Kube
from mqcluster_testing.operator.realplane.node_agent import NodeAgent
from tests.broker.grpc.client_util import client_config
from tests.ha.test_processes import TOPIC, History, produce, wait_acks

from ..follow.test_migration_full_loop import Loop, running_loop

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

GRPC_PORT = 8081


@pytest.fixture
async def loop(kube: Kube, node_agent: NodeAgent) -> AsyncIterator[Loop]:
    async with running_loop(kube, node_agent) as the_loop:
        yield the_loop


def selected(loop: Loop, selector: dict[str, str]) -> list[dict[str, Any]]:
    """Ready pods the Service selects (the node agent's loopback pod IPs are refused by
    Endpoints, so selection is read from the selector, as the endpoints controller does)."""
    out = []
    for pod in loop.kubelet.mirror.all("v1/pods"):
        labels = pod["metadata"].get("labels") or {}
        conds = {c["type"]: c["status"] for c in (pod.get("status") or {}).get("conditions", [])}
        if all(labels.get(k) == v for k, v in selector.items()) and conds.get("Ready") == "True" \
                and not pod["metadata"].get("deletionTimestamp"):
            out.append(pod)
    return out


class ServiceAddress:
    """A local address standing for the Service: each connection goes to one endpoint."""

    def __init__(self, endpoints: Any) -> None:
        self.endpoints = endpoints
        self.server: asyncio.Server | None = None
        self.rng = random.Random(5)

    async def start(self, host: str) -> str:
        self.server = await asyncio.start_server(self._connection, host, 0)
        return f"{host}:{self.server.sockets[0].getsockname()[1]}"

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        choices = self.endpoints()
        try:
            if not choices:
                raise OSError("no ready endpoint")
            host, _, port = self.rng.choice(choices).rpartition(":")
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, ConnectionError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(OSError, ConnectionError):
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


async def controller_status(loop: Loop) -> dict[str, Any]:
    obj = await loop.kubelet.api.get_path(
        f"/apis/mqcluster.io/v1alpha1/namespaces/{loop.ns}/controllers/mqc")
    return ((obj or {}).get("status")) or {}


def consume_ids(endpoints: str, want: set[str], timeout: float) -> set[str]:
    c = SimpleConsumer(client_config(endpoints), "ProxyRealGroup",
                       {TOPIC: FilterExpression("*")}, await_duration=1)
    c.startup()
    got: set[str] = set()
    try:
        give_up = time.monotonic() + timeout
        while not want <= got and time.monotonic() < give_up:
            try:
                for m in c.receive(32, 15):
                    got.add(m.message_id)
                    c.ack(m)
            except Exception:
                time.sleep(0.1)
    finally:
        c.shutdown()
    return got


async def test_the_official_client_rides_through_master_and_proxy_failures(loop: Loop) -> None:
    h, k = loop.h, loop.kubelet
    await h.api.create({"apiVersion": "mqcluster.io/v1alpha1", "kind": "Controller",
                        "metadata": {"name": "mqc", "namespace": loop.ns},
                        "spec": {"replicas": 1, "deployment": "EmbeddedInNamesrv",
                                 "proxy": {"enabled": True}}})
    await h.api.create({"apiVersion": "mqcluster.io/v1alpha1", "kind": "BrokerGroup",
                        "metadata": {"name": "bg", "namespace": loop.ns},
                        # an acknowledged send is in every in-sync replica: none lost
                        # when the master dies
                        "spec": {"mode": "Controller", "replicas": 3,
                                 "allAckInSyncStateSet": True,
                                 "controllerRef": {"name": "mqc"}}})
    await h.eventually(lambda: len(loop.status().get("syncStateSet") or []) == 3
                       and loop.status().get("masterPod"), timeout=120,
                       what=lambda: f"a full SyncStateSet; status {loop.status()}")
    service = await h.eventually(lambda: h.obj("v1/services", "mqc-proxy", loop.ns),
                                 what="the proxy's client Service")
    selector = service["spec"]["selector"]
    proxies = await h.eventually(lambda: (p := selected(loop, selector)) and len(p) == 2 and p,
                                 timeout=90, what="two ready proxy pods")
    assert (await controller_status(loop)).get("proxyEndpoint") == \
        f"mqc-proxy.{loop.ns}.svc:{GRPC_PORT}"
    service_address = ServiceAddress(lambda: [f"{k.ip_of(p['metadata']['name'])}:{GRPC_PORT}"
                                              for p in selected(loop, selector)])
    endpoints = await service_address.start("127.0.0.1")
    master = loop.master_addr()
    async with AdminClient(broker_addr=master) as admin:
        await admin.create_topic(TOPIC, 4, broker_addr=master)

    history = History()
    worker = threading.Thread(target=produce, args=(endpoints, history), daemon=True)
    worker.start()
    gaps: dict[str, float] = {}

    async def fault(name: str, act: Any, settled: Any) -> None:
        await wait_acks(history, len(history.acked) + 20, timeout=60)
        t = time.monotonic()
        await act()
        await h.eventually(settled, timeout=60, what=f"{name}: the cluster settled")
        await wait_acks(history, len(history.acked) + 20, timeout=60)
        gaps[name] = max((b - a for a, b in zip(history.ack_times, history.ack_times[1:],
                                                strict=False) if b >= t), default=0.0)

    try:
        hung = loop.status()["masterPod"]
        pid = k.running[hung].proc.proc.pid  # type: ignore[union-attr]

        async def stop() -> None:
            os.kill(pid, signal.SIGSTOP)

        await fault("master SIGSTOP", stop,
                    lambda: loop.status().get("masterPod") not in (None, hung))
        os.kill(pid, signal.SIGCONT)
        await h.eventually(lambda: len(loop.status().get("syncStateSet") or []) == 3,
                           timeout=90, what="the woken master back in sync")
        killed = loop.status()["masterPod"]
        await fault("master SIGKILL", lambda: k.kill(killed),
                    lambda: loop.status().get("masterPod") not in (None, killed))
        proxy_pod = proxies[0]["metadata"]["name"]
        await fault("proxy SIGKILL", lambda: k.kill(proxy_pod), lambda: True)
        failed_before = len(history.failed)
        old = {p["metadata"]["name"] for p in selected(loop, selector)}

        async def roll() -> None:  # a new proxy.conf: a new pod template, a rollout
            await h.api.patch(Ref("mqcluster.io/v1alpha1", "Controller", loop.ns, "mqc"),
                              {"spec": {"proxy": {"config": {"probeIntervalMs": "200"}}}})

        await fault("rolling update of the proxies", roll,
                    lambda: (now := {p["metadata"]["name"] for p in selected(loop, selector)})
                    and len(now) == 2 and not now & old
                    and not any(n in k.running for n in old))
        rollout_failures = len(history.failed) - failed_before
    finally:
        history.stop.set()
        await asyncio.to_thread(worker.join, 30)
    print("longest pauses between acknowledged sends: "
          + ", ".join(f"{name} {gap:.2f} s" for name, gap in gaps.items()))
    assert rollout_failures == 0, "a send failed during the proxies' rolling update"
    acked = set(history.acked.values())
    assert len(acked) >= 80
    try:
        got = await asyncio.to_thread(consume_ids, endpoints, acked, 240)
    finally:
        await service_address.close()
    assert acked <= got, (f"acknowledged but not received: {len(acked - got)} of "
                          f"{len(acked)} ({len(got)} received): {sorted(acked - got)[:10]}")
