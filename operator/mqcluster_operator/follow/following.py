"""Following the election: relabel the pods ``role=master|slave``, report the election in
the status, and a MasterChanged event (planned by ``election_plan.plan_follow``; the
election itself is read by ``election_poller``)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mqcluster.protocol.election import Election

from .. import metrics, names
from ..events import build_event
from ..k8s import Ref, differs
from ..reconcile import paused
from .context import WRITE_MEMORY, Context, Round, merged
from .election_plan import PodInfo, plan_follow
from .election_poller import Subscription
from .epochs_plan import ReplicaEpochs


@dataclass
class FollowingMemo:
    """The status the last ``follow`` wrote and when: written a moment ago and not yet
    seen by the index, it is not written again (the follower is its only writer)."""

    wrote: dict[str, Any] = field(default_factory=dict)
    wrote_at: float = float("-inf")


async def relabel(ctx: Context, sub: Subscription | None, selector: dict[str, str] | None,
                  live: Mapping[str, Any]) -> None:
    """Point the Service at the newly elected master before anything else is read or written.

    Labels depend only on the election and the pods; status, events and the
    rest follow in the step.
    """
    election = sub.latest if sub is not None else None
    if not isinstance(election, Election) or selector is None or paused(live):
        return
    ns = live["metadata"]["namespace"]
    pods = [PodInfo.of(p) for p in await ctx.reads.list(Ref("v1", "Pod", ns), selector)]
    plan = plan_follow({}, election, pods, ctx.clock())
    for pod, role in plan.relabels:
        await ctx.api.patch(Ref("v1", "Pod", ns, pod),
                            {"metadata": {"labels": {names.LABEL_ROLE: role}}})


async def follow(
    ctx: Context, memo: FollowingMemo, rnd: Round, status: dict[str, Any], election: Election,
    epochs: Mapping[str, ReplicaEpochs],
) -> dict[str, Any]:
    """Relabels, status and event for ``election``; returns ``status`` with what it wrote."""
    body, ref, now = rnd.body, rnd.ref, rnd.now
    started = time.monotonic()
    plan = plan_follow(status, election, rnd.pods, now, epochs)
    for pod, role in plan.relabels:
        labels = {"metadata": {"labels": {names.LABEL_ROLE: role}}}
        await ctx.api.patch(Ref("v1", "Pod", ref.namespace, pod), labels)
    if plan.changed and plan.master_pod:
        metrics.RELABEL_SECONDS.observe(time.monotonic() - started)
        metrics.MASTER_CHANGES.labels(ref.namespace, ref.name).inc()
    # Written a moment ago and not yet seen by the index: not again.
    just_written = (plan.status == memo.wrote
                    and time.monotonic() - memo.wrote_at < WRITE_MEMORY)
    if differs(plan.status, status) and not just_written:
        # status.masterPod before the conditions: it is what a failover changes
        await ctx.write_status(ref, plan.status, fields_first=plan.changed)
        memo.wrote, memo.wrote_at = dict(plan.status), time.monotonic()
    if plan.event:
        ctx.log.info("%s/%s: %s", ref.namespace, ref.name, plan.event[2])
        await ctx.api.post_event(build_event(body, *plan.event, now))
    return merged(status, plan.status)
