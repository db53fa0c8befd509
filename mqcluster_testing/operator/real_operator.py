"""The operator (kopf with the production handlers) against the real control plane, for
one namespace, its probes and drivers reaching the node agent's pods.

kopf runs in its own thread and loop, as in kopf_harness. The intervals default to the
production ones (the chart's values); what a test measures is then what a cluster shows.
``Timeline`` stamps, as the tests' watch (the node agent's mirror) sees them, the moments
a pod turns Ready or NotReady and a resource's status changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import kopf

from mqcluster_operator import handlers
from mqcluster_operator.follow.election_probes import ProbeTarget, default_probe
from mqcluster_operator.follow.upgrade_driver import AdminUpgradeDriver

from .realplane.controlplane import Kube
from .realplane.node_agent import NodeAgent

BG = "brokergroups.v1alpha1.mqcluster.io"
MQC = "controllers.v1alpha1.mqcluster.io"
PODS = "v1/pods"


def pod_ready(pod: dict[str, Any] | None) -> bool:
    conds = ((pod or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


@dataclass
class Timeline:
    """(monotonic time, what) for every readiness change of a pod and every change of a
    resource's Ready condition, masterPod and the pods' role labels, in the order seen."""

    marks: list[tuple[float, str, str, Any]] = field(default_factory=list)
    _last: dict[tuple[str, str], Any] = field(default_factory=dict)

    def listener(self, plural: str, kind: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if plural == PODS:
            gone = kind == "DELETED"
            self._note("ready", name, None if gone else pod_ready(obj))
            labels = obj["metadata"].get("labels") or {}
            self._note("role", name, None if gone else labels.get("role"))
        elif plural in (BG, MQC):
            ready = condition(obj, "Ready") or {}
            self._note("Ready", name, ready.get("status"))
            self._note("masterPod", name, (obj.get("status") or {}).get("masterPod"))
            upgrading = condition(obj, "Upgrading") or {}
            self._note("Upgrading", name, (upgrading.get("status"), upgrading.get("reason")))

    def _note(self, what: str, name: str, value: Any) -> None:
        if self._last.get((what, name), ...) != value:
            self._last[(what, name)] = value
            self.marks.append((time.monotonic(), what, name, value))

    def first(self, what: str, name: str, value: Any, after: float = 0.0) -> float | None:
        for at, w, n, v in self.marks:
            if at >= after and (w, n, v) == (what, name, value):
                return at
        return None

    def last(self, what: str, name: str, value: Any, before: float) -> float | None:
        found = None
        for at, w, n, v in self.marks:
            if at <= before and (w, n, v) == (what, name, value):
                found = at
        return found


@dataclass
class OperatorRun:
    kube: Kube
    agent: NodeAgent
    timeline: Timeline

    @property
    def namespace(self) -> str:
        return self.agent.namespace

    def obj(self, plural: str, name: str) -> dict[str, Any] | None:
        return self.agent.mirror.live(plural, self.namespace, name)

    def status(self, plural: str, name: str) -> dict[str, Any]:
        return dict((self.obj(plural, name) or {}).get("status") or {})

    def role(self, pod: str) -> str | None:
        return ((self.obj(PODS, pod) or {}).get("metadata", {}).get("labels") or {}).get("role")

    def describe(self) -> str:
        pods = {p["metadata"]["name"]: pod_ready(p) for p in self.agent.mirror.all(PODS)}
        return f"pods ready {pods}; groups " \
               f"{[o.get('status') for o in self.agent.mirror.all(BG)]}; " \
               f"agent errors {self.agent.errors}"

    async def eventually(self, check: Callable[[], Any], what: str,
                         timeout: float = 120.0) -> Any:
        deadline = time.monotonic() + timeout
        while not (result := check()):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}: {self.describe()}")
            await asyncio.sleep(0.02)
        return result


@contextlib.asynccontextmanager
async def operator_on(
    kube: Kube, agent: NodeAgent, follow_interval: float = 2.0, poll_interval: float = 0.2,
    reconcile_interval: float = 30.0, **memo_extra: Any,
) -> AsyncIterator[OperatorRun]:
    """The operator for the agent's namespace, with the admin's credentials; its probes and
    upgrade driver reach the pods through ``agent.resolve``."""
    timeline = Timeline()
    agent.mirror.listen(timeline.listener)

    def probes(target: ProbeTarget) -> Any:
        return default_probe(ProbeTarget(
            tuple(agent.resolve(a) for a in target.controller_addrs),
            tuple((agent.resolve(a), agent.resolve(u)) for a, u in target.health)))

    registry = kopf.OperatorRegistry()
    handlers.register(registry, reconcile_interval=reconcile_interval)
    settings = kopf.OperatorSettings()
    settings.posting.enabled = False
    settings.background.instant_exit_timeout = 0.5
    connection = kube.connection()
    memo = kopf.Memo(
        connect=lambda **_: connection,
        probe_factory=probes,
        upgrade_driver=AdminUpgradeDriver(agent.resolve),
        follow_interval=follow_interval,
        poll_interval=poll_interval,
        **memo_extra,
    )
    stop = threading.Event()
    thread = threading.Thread(
        target=asyncio.run,
        args=(kopf.operator(registry=registry, settings=settings, memo=memo,
                            namespaces=[agent.namespace], standalone=True, stop_flag=stop),),
        name="kopf-real", daemon=True)
    thread.start()
    try:
        yield OperatorRun(kube, agent, timeline)
    finally:
        stop.set()
        await asyncio.to_thread(thread.join, 15)
