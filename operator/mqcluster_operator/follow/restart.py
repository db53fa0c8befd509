"""A rolling restart asked for by the ``mqcluster.io/restart`` annotation: one pod deleted
per step, as ``restart_plan`` says, recorded in ``status.restart``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import names
from ..events import REASON_RESTART, build_event
from ..k8s import Ref
from .context import Context, Round
from .restart_plan import plan_restart


async def restart(ctx: Context, rnd: Round, status: Mapping[str, Any]) -> bool:
    """One step of a requested restart; True while one is in progress."""
    body, ref, spec = rnd.body, rnd.ref, rnd.spec
    annotations = body["metadata"].get("annotations") or {}
    requested = annotations.get(names.ANNOTATION_RESTART)
    step = plan_restart(
        requested, status.get("restart"), rnd.pods, spec.replicas, status.get("masterPod"),
    )
    busy = bool(requested) and (status.get("restart") or {}).get("completed") != requested
    if step.status is None:
        return busy
    if step.delete:
        await ctx.api.delete(Ref("v1", "Pod", ref.namespace, step.delete))
    await ctx.api.patch(ref, {"status": {"restart": step.status}}, "status")
    if step.delete or step.done:
        message = f"restarted pod {step.delete}" if step.delete else "restart completed"
        await ctx.api.post_event(build_event(body, "Normal", REASON_RESTART, message,
                                             ctx.clock()))
    return not step.done
