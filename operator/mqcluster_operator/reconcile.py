"""Pure reconcile planning: a resource body in, the objects to apply and a status patch out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from . import conditions, names
from .events import REASON_INVALID_SPEC
from .follow.migration_plan import rendering
from .follow.scaling_plan import rendered_replicas
from .manifests import Owner, SpecError, build_brokergroup, build_controller, controller_view, proxy
from .manifests.broker import for_migration
from .manifests.controller import ControllerView
from .models import BrokerGroupSpec, ControllerSpec, mode_change_allowed

Obj = dict[str, Any]
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Outcome:
    objects: list[Obj] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    event: tuple[str, str, str] | None = None
    statefulset: str | None = None
    """Name of the StatefulSet whose readiness decides Ready (when objects were built)."""


def validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"spec.{loc}: {msg}" if loc else f"spec: {msg}")
    return "; ".join(parts)


def parse(model: type[M], raw: Any) -> tuple[M | None, str]:
    try:
        return model.model_validate(dict(raw or {})), ""
    except ValidationError as exc:
        return None, validation_message(exc)


def generation(body: Mapping[str, Any]) -> int | None:
    value = body.get("metadata", {}).get("generation")
    return int(value) if value is not None else None


def paused(body: Mapping[str, Any]) -> bool:
    annotations = body.get("metadata", {}).get("annotations") or {}
    return str(annotations.get(names.ANNOTATION_PAUSE, "")).lower() == "true"


def not_ready(
    body: Mapping[str, Any], reason: str, message: str, now: str, phase: str,
    event_type: str | None = "Warning",
) -> Outcome:
    status = body.get("status") or {}
    previous = conditions.get_condition(status.get("conditions", []), "Ready") or {}
    conds = conditions.set_condition(
        status.get("conditions", []), "Ready", False, reason, message, now, generation(body)
    )
    repeated = previous.get("reason") == reason and previous.get("message") == message
    event = (event_type, reason, message) if event_type and not repeated else None
    return Outcome(
        status={"phase": phase, "observedGeneration": generation(body), "conditions": conds},
        event=event,
    )


def plan_controller(body: Mapping[str, Any], now: str) -> Outcome:
    if paused(body):
        return not_ready(body, "Paused", "reconciliation is paused", now, "Paused", None)
    spec, error = parse(ControllerSpec, body.get("spec"))
    if spec is None:
        return not_ready(body, REASON_INVALID_SPEC, error, now, "Failed")
    owner = Owner.from_body(body)
    status: dict[str, Any] = {"observedGeneration": generation(body)}
    # The proxy tier (manifests/proxy.py) is the endpoint to give clients when enabled.
    if spec.proxy.enabled:
        status["proxyEndpoint"] = proxy.endpoint(owner, spec.proxy)
    elif (body.get("status") or {}).get("proxyEndpoint"):
        status["proxyEndpoint"] = None
    return Outcome(
        objects=build_controller(owner, spec) + proxy.build_proxy(owner, spec),
        status=status,
        statefulset=owner.name,
    )


def controller_ref(body: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, name) of the Controller a BrokerGroup refers to, if any."""
    ref = (body.get("spec") or {}).get("controllerRef")
    if not ref or not ref.get("name"):
        return None
    return ref.get("namespace") or body["metadata"]["namespace"], ref["name"]


def view_of(controller: Mapping[str, Any]) -> ControllerView | None:
    spec, _ = parse(ControllerSpec, controller.get("spec"))
    if spec is None:
        return None
    meta = controller["metadata"]
    return controller_view(meta["name"], meta["namespace"], spec)


def plan_brokergroup(
    body: Mapping[str, Any], controller: Mapping[str, Any] | None, now: str
) -> Outcome:
    """``controller`` is the Controller named by controllerRef (None: absent or no ref)."""
    if paused(body):
        return not_ready(body, "Paused", "reconciliation is paused", now, "Paused", None)
    spec, error = parse(BrokerGroupSpec, body.get("spec"))
    if spec is None:
        return not_ready(body, REASON_INVALID_SPEC, error, now, "Failed")
    view = None
    ref = controller_ref(body)
    if ref is not None:
        if controller is None:
            message = f"Controller {ref[0]}/{ref[1]} not found"
            return not_ready(body, "ControllerNotFound", message, now, "Pending")
        view = view_of(controller)
        if view is None:
            message = f"Controller {ref[0]}/{ref[1]} has an invalid spec"
            return not_ready(body, "ControllerInvalid", message, now, "Pending")
    owner = Owner.from_body(body)
    status = body.get("status") or {}
    refusal = transition_refusal(status, spec, owner.name)
    if refusal is not None:
        return not_ready(body, refusal[0], refusal[1], now, "Failed")
    # A DLedger group moving to controller mode keeps its mode until the migration
    # (driven by the group's follower, recorded in status.migration) clears its stores.
    render = rendering(spec, status.get("appliedMode"), status.get("migration"))
    # A controller-mode scale-down keeps the pods until its plan (scaling.py) lets them go.
    replicas = spec.replicas if render.mode != "Controller" else rendered_replicas(
        spec.replicas, status.get("appliedReplicas"), status.get("scaling"))
    built = spec if (render.mode, replicas) == (spec.mode, spec.replicas) \
        else spec.model_copy(update={"mode": render.mode, "replicas": replicas})
    try:
        objects = for_migration(build_brokergroup(owner, built, view), spec,
                                render.stopped, render.clear_store)
    except SpecError as exc:
        return not_ready(body, REASON_INVALID_SPEC, str(exc), now, "Failed")
    return Outcome(
        objects=objects,
        status={
            "observedGeneration": generation(body),
            "appliedMode": render.mode,
            "appliedReplicas": replicas,
            "appliedBrokerName": spec.broker_name(owner.name),
        },
        statefulset=owner.name,
    )


def transition_refusal(
    status: Mapping[str, Any], spec: BrokerGroupSpec, name: str
) -> tuple[str, str] | None:
    """(reason, message) when the spec changes what cannot change on running brokers.

    Compared with what the objects were last built for (``status.applied*``), so the
    check holds across resyncs and operator restarts. DLedger to Controller is the
    one mode change allowed: the migration (``migration.py``) carries it out.
    """
    applied_mode = status.get("appliedMode")
    if applied_mode and applied_mode != spec.mode \
            and not mode_change_allowed(applied_mode, spec.mode):
        return REASON_INVALID_SPEC, f"mode cannot change from {applied_mode} to {spec.mode}"
    applied_name = status.get("appliedBrokerName")
    if applied_name and applied_name != spec.broker_name(name):
        return REASON_INVALID_SPEC, f"brokerName is immutable (was {applied_name})"
    return None


def pod_ready(pod: Mapping[str, Any]) -> bool:
    """Ready and not being deleted (a terminating pod is leaving, whatever it says)."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def ready_pods(
    name: str, want: int, pods: Sequence[Mapping[str, Any]],
) -> tuple[int, list[str]]:
    """(how many of the pods ``name-0`` .. ``name-(want-1)`` are Ready, those that are not)."""
    by_name = {str((p.get("metadata") or {}).get("name")): p for p in pods}
    wanted = [f"{name}-{i}" for i in range(want)]
    not_ready = [pod for pod in wanted if pod not in by_name or not pod_ready(by_name[pod])]
    return want - len(not_ready), not_ready


def readiness(
    body: Mapping[str, Any], statefulset: Mapping[str, Any] | None, now: str,
    needs_master: bool, pods: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Phase, readyReplicas and the Ready/Progressing conditions, counted from ``pods`` (the
    StatefulSet's pods as the watch shows them: the StatefulSet's own count follows them)
    or, without them, from the StatefulSet's ``readyReplicas``."""
    status = body.get("status") or {}
    want = int((body.get("spec") or {}).get("replicas") or 0)
    missing: list[str] = []
    if pods is not None and statefulset is not None:
        ready, missing = ready_pods(body["metadata"]["name"], want, pods)
    else:
        ready = int(((statefulset or {}).get("status") or {}).get("readyReplicas") or 0)
    master = status.get("masterPod")
    gen = generation(body)
    conds = status.get("conditions", [])
    if ready >= want and (master or not needs_master):
        conds = conditions.set_condition(
            conds, "Ready", True, "AllReplicasReady", f"{ready}/{want} replicas ready", now, gen
        )
        conds = conditions.set_condition(conds, "Progressing", False, "Stable", "", now, gen)
        phase = "Running"
    else:
        why = f"{ready}/{want} replicas ready" + ("" if master or not needs_master
                                                  else ", no master")
        if missing and len(missing) < want:
            why += f" ({', '.join(missing)} not Ready)"
        reason = "ReplicasNotReady" if ready < want else "NoMaster"
        conds = conditions.set_condition(conds, "Ready", False, reason, why, now, gen)
        conds = conditions.set_condition(conds, "Progressing", True, reason, why, now, gen)
        phase = "Pending" if ready == 0 else "Degraded"
    # a roll takes pods down one at a time on purpose: Upgrading, not Degraded
    upgrading = conditions.get_condition(conds, "Upgrading")
    if upgrading and upgrading.get("status") == "True":
        phase = "Upgrading"
    return {"phase": phase, "readyReplicas": ready, "conditions": conds}


READINESS_REASONS = frozenset({"AllReplicasReady", "ReplicasNotReady", "NoMaster"})
"""The Ready reasons ``readiness`` gives; any other is the planner's (an invalid spec, a
pause, a missing Controller) and stands until the next reconciliation."""
