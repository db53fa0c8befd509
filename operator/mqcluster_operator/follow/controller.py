"""Following a Controller: its active controller, Raft term and members, into its status
(the Controller daemon's step)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import conditions, metrics, names
from ..events import build_event
from ..k8s import Api, Ref, differs
from ..manifests import controller_view
from ..models import ControllerSpec
from ..reconcile import parse, paused
from ..views import Reads
from .context import Clock, Log
from .election_plan import ControllerProbe, PodInfo, ProbeError, pod_for_address
from .election_poller import ProbeFactory
from .election_probes import ProbeTarget


class ProbeCache:
    """One probe per target; replaced when the target changes (e.g. controllers scaled)."""

    def __init__(self, factory: ProbeFactory) -> None:
        self._factory = factory
        self._target: ProbeTarget | None = None
        self._probe: ControllerProbe | None = None

    async def get(self, target: ProbeTarget) -> ControllerProbe:
        if self._probe is None or target != self._target:
            await self.close()
            self._probe, self._target = self._factory(target), target
        return self._probe

    async def close(self) -> None:
        if self._probe is not None:
            await self._probe.close()
            self._probe = None


class ControllerFollower:
    """Active controller, Raft term and members of a Controller, into its status."""

    def __init__(
        self, api: Api, factory: ProbeFactory, clock: Clock, logger: Log,
        reads: Reads | None = None,
    ) -> None:
        self.api = api
        self.reads: Reads = reads or api
        self.probes = ProbeCache(factory)
        self.clock = clock
        self.log = logger

    async def close(self) -> None:
        await self.probes.close()

    async def step(self, live: Mapping[str, Any]) -> None:
        with metrics.follow_timer("Controller"):
            await self._step(live)

    async def _step(self, live: Mapping[str, Any]) -> None:
        body = await self.reads.get(Ref.of(live))
        if body is None or paused(body):
            return
        spec, _ = parse(ControllerSpec, body.get("spec"))
        if spec is None:
            return
        meta = body["metadata"]
        ref = Ref(names.API_VERSION, "Controller", meta["namespace"], meta["name"])
        view = controller_view(meta["name"], meta["namespace"], spec)
        probe = await self.probes.get(ProbeTarget(controller_addrs=view.controller_addr))
        status = body.get("status") or {}
        now = self.clock()
        pods = [PodInfo(names.pod(meta["name"], i)) for i in range(spec.replicas)]
        try:
            info = await probe.metadata()
        except ProbeError as exc:
            metrics.PROBE_FAILURES.labels(ref.namespace, ref.name).inc()
            conds = conditions.set_condition(
                status.get("conditions", []), "LeaderElected", None, "ProbeFailed", str(exc), now
            )
            if differs(conds, status.get("conditions")):
                await self.api.write_status(ref, {"conditions": conds}, conditions.FOLLOWER)
            return
        active = pod_for_address(info.active, pods)
        elected = ("ActiveController", f"active controller is {active}") if active else (
            "NoActiveController", "no controller is active")
        patch = {
            "activeController": active,
            "raftTerm": info.term,
            "members": [pod_for_address(m, pods) or m for m in info.members],
            "conditions": conditions.set_condition(
                status.get("conditions", []), "LeaderElected", active is not None,
                elected[0], elected[1], now,
            ),
        }
        if differs(patch, status):
            await self.api.write_status(ref, patch, conditions.FOLLOWER)
        if active and active != status.get("activeController"):
            message = f"active controller changed from {status.get('activeController') or 'none'}" \
                      f" to {active} (term {info.term})"
            await self.api.post_event(
                build_event(body, "Normal", "ActiveControllerChanged", message, now)
            )
