"""A switchover asked for by the ``mqcluster.io/switchover-to`` annotation: the controller
is asked to elect the named pod (``election_plan.switchover_target`` checks it may be),
the annotation is cleared and an Event says how it went."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import names
from ..events import REASON_SWITCHOVER, build_event
from .context import Context, Round
from .election_plan import switchover_target


async def switchover(ctx: Context, rnd: Round, status: Mapping[str, Any]) -> None:
    body, ref, spec = rnd.body, rnd.ref, rnd.spec
    annotations = body["metadata"].get("annotations") or {}
    requested = annotations.get(names.ANNOTATION_SWITCHOVER)
    if not requested:
        return
    now = ctx.clock()
    broker_id, why_not = switchover_target(requested, status)
    if spec.mode != "Controller":
        broker_id, why_not = None, "switchover needs mode Controller"
    if broker_id is not None:
        try:
            await rnd.probe.switchover(spec.clusterName, spec.broker_name(ref.name), broker_id)
        except Exception as exc:
            why_not = f"controller refused: {exc}"
    if why_not:
        event = ("Warning", REASON_SWITCHOVER, f"switchover to {requested} failed: {why_not}")
    else:
        event = ("Normal", REASON_SWITCHOVER, f"switchover to {requested} requested")
    await ctx.api.patch(
        ref, {"metadata": {"annotations": {names.ANNOTATION_SWITCHOVER: None}}}
    )
    await ctx.api.post_event(build_event(body, *event, now))
