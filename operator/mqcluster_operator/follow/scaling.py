"""Scaling a controller-mode group: one step of a scale-down per round (planned by
``scaling_plan``; the controllers' and name servers' side is ``scaling_driver``), and the
catch-up progress of replicas outside the SyncStateSet."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import names
from ..events import build_event
from ..k8s import Ref
from ..manifests import SpecError
from ..manifests.broker import namesrv_addr
from ..models import BrokerGroupSpec
from ..reconcile import controller_ref, view_of
from .context import Context, Round
from .epochs_plan import ReplicaEpochs
from .scaling_driver import ScalingDriver
from .scaling_plan import UNDER_WAY, ScaleFacts, ScaleStep, plan_scale


async def scale(ctx: Context, driver: ScalingDriver, rnd: Round, status: Mapping[str, Any],
                epochs: Mapping[str, ReplicaEpochs]) -> bool:
    """One step of a scale-down, or the catch-up progress of replicas outside the
    SyncStateSet (controller mode); True while a scale-down moves the master or
    removes pods (switchovers, restarts and upgrades wait for it)."""
    body, ref, spec = rnd.body, rnd.ref, rnd.spec
    if status.get("appliedMode") != "Controller":
        return False
    members = {str(r.get("pod")): r for r in status.get("replicas") or []}
    facts = ScaleFacts(
        name=ref.name, master=status.get("masterPod"),
        sync_state_set=list(status.get("syncStateSet") or []),
        pods=[p.name for p in rnd.pods],
        broker_ids={pod: int(r["brokerId"]) for pod, r in members.items()
                    if r.get("brokerId") is not None},
        addresses={pod: str(r["address"]) for pod, r in members.items()
                   if r.get("address")},
        offsets={pod: e.max_offset for pod, e in epochs.items()},
        learners=spec.asyncLearnerReplicas)
    step = plan_scale(spec.replicas, status.get("appliedReplicas"), spec.minInSyncReplicas,
                      spec.storage.reclaimPolicy, status.get("scaling"), facts)
    if step is None:
        return False
    condition = step.condition
    try:
        if step.switchover_to is not None:
            await rnd.probe.switchover(spec.clusterName, spec.broker_name(ref.name),
                                       facts.broker_ids[step.switchover_to])
        if step.retire or step.unregister:
            await driver.retire(rnd.target.controller_addrs, await namesrvs(ctx, body, spec),
                                spec.clusterName, spec.broker_name(ref.name), step.retire,
                                step.unregister)
    except Exception as exc:  # the controller refuses (a stopped broker still alive)
        ctx.log.info("%s/%s: scaling waits: %s", ref.namespace, ref.name, exc)
        condition = (True, "Retiring" if step.retire else "SwitchingOver",
                     f"waiting for the controller: {exc}")
        step = ScaleStep(condition=condition)
    for claim in step.delete_claims:
        await ctx.api.delete(Ref("v1", "PersistentVolumeClaim", ref.namespace, claim))
    patch: dict[str, Any] = {}
    if step.status is not None:
        patch["scaling"] = step.status or None
    await ctx.write_with_condition(ref, status, patch, "Scaling", condition)
    if step.event is not None:
        ctx.log.info("%s/%s: %s", ref.namespace, ref.name, step.event[1])
        await ctx.api.post_event(build_event(body, step.event[0], "Scaling",
                                             step.event[1], ctx.clock()))
    current = (step.status if step.status is not None else status.get("scaling")) or {}
    return current.get("step") in UNDER_WAY


async def namesrvs(ctx: Context, body: Mapping[str, Any], spec: BrokerGroupSpec) -> list[str]:
    ref = controller_ref(body)
    controller = (await ctx.reads.get(Ref(names.API_VERSION, "Controller", *ref))
                  if ref else None)
    view = view_of(controller) if controller else None
    try:
        return [a for a in namesrv_addr(spec, view).split(";") if a]
    except SpecError:
        return []
