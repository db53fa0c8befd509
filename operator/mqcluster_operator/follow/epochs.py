"""Epoch checks: read the replicas' epoch entries (for ``status.replicas``), report those
that conflict with the master's and wipe one a person approved
(``mqcluster.io/wipe-replica``). Planned by ``epochs_plan``."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import names
from ..events import build_event
from ..k8s import Ref
from .context import WRITE_MEMORY, Context, Round, broker_addr
from .epochs_driver import EpochsDriver
from .epochs_plan import ReplicaEpochs, find_conflicts, plan_epochs

EPOCH_INTERVAL = 2.0  # seconds between two reads of the replicas' epoch entries


@dataclass
class EpochsMemo:
    read: dict[str, ReplicaEpochs] = field(default_factory=dict)
    """The entries last read, by pod (``follow`` and ``scaling`` use them too)."""
    read_at: float = float("-inf")
    wiped: tuple[str, float] = ("", float("-inf"))
    """The wipe carried out last and when: its annotation, cleared at once, may still
    be in an index that lags behind, and must not wipe the recreated pod."""


async def check_epochs(ctx: Context, memo: EpochsMemo, driver: EpochsDriver, rnd: Round,
                       status: Mapping[str, Any]) -> None:
    body, ref, spec = rnd.body, rnd.ref, rnd.spec
    annotation = (body["metadata"].get("annotations") or {}).get(
        names.ANNOTATION_WIPE_REPLICA)
    if annotation == memo.wiped[0] and time.monotonic() - memo.wiped[1] < WRITE_MEMORY:
        annotation = None
    if status.get("appliedMode") != "Controller" or (
            not annotation and time.monotonic() - memo.read_at < EPOCH_INTERVAL):
        return
    memo.read_at = time.monotonic()
    ns = ref.namespace
    addrs = {p.name: broker_addr(ref.name, ns, spec, p.name) for p in rnd.pods}
    answers = await driver.epochs(list(addrs.values()))
    memo.read = {pod: answers[a] for pod, a in addrs.items() if a in answers}
    master = status.get("masterPod")
    if master not in memo.read and not annotation:
        return  # nothing to compare with
    found = find_conflicts(master, memo.read)
    # Without the master's entries nothing was compared: recorded conflicts stay.
    compared = list(memo.read) if master in memo.read else []
    step = plan_epochs(found, compared, status.get("epochConflicts") or [],
                       master, sorted(addrs), annotation)
    now = ctx.clock()
    if step.wipe is not None:
        # The claim goes first: the pod recreated by the StatefulSet gets a new one.
        await ctx.api.delete(Ref("v1", "PersistentVolumeClaim", ns, f"data-{step.wipe}"))
        await ctx.api.delete(Ref("v1", "Pod", ns, step.wipe))
        memo.read.pop(step.wipe, None)
        memo.wiped = (step.wipe, time.monotonic())
    patch: dict[str, Any] = {}
    if step.conflicts is not None:
        patch["epochConflicts"] = step.conflicts
    await ctx.write_with_condition(ref, status, patch, "Degraded", step.condition)
    if step.clear_annotation:
        await ctx.api.patch(
            ref, {"metadata": {"annotations": {names.ANNOTATION_WIPE_REPLICA: None}}})
    for kind, message in step.events:
        ctx.log.info("%s/%s: %s", ns, ref.name, message)
        await ctx.api.post_event(build_event(body, kind, "EpochConflict", message, now))
