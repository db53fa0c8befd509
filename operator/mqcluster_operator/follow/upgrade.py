"""Rolling upgrade: one step per round of the roll ``upgrade_plan`` plans (pods deleted
one at a time, the master handed over first); the brokers' side (commitlog offsets,
DLedger leadership transfer) is ``upgrade_driver``."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import names
from ..events import REASON_UPGRADE, build_event
from ..k8s import Ref, differs
from ..models import BrokerGroupSpec
from .context import Context, Round, broker_addr, merge_patch
from .election_plan import PodInfo, switchover_target
from .upgrade_driver import UpgradeDriver
from .upgrade_plan import RESUME, REVISION_LABEL, UpgradeStep, plan_upgrade


@dataclass
class UpgradeMemo:
    recorded: dict[str, Any] | None = None
    """``status.upgrade`` as this follower last wrote it: it is the only writer, so its
    memory is newer than an index that has not seen the last write yet (a stale copy
    could delete twice)."""
    handover_failed: str | None = None
    """The last handover error (one Event per distinct error)."""


async def upgrade(ctx: Context, memo: UpgradeMemo, driver: UpgradeDriver, rnd: Round,
                  status: Mapping[str, Any]) -> None:
    body, ref, spec = rnd.body, rnd.ref, rnd.spec
    pods, revisions = rnd.pods, rnd.revisions
    sts = await ctx.reads.get(Ref("apps/v1", "StatefulSet", ref.namespace, ref.name))
    revision = ((sts or {}).get("status") or {}).get("updateRevision")
    annotations = body["metadata"].get("annotations") or {}
    resume = annotations.get(names.ANNOTATION_UPGRADE) == RESUME
    recorded = memo.recorded if memo.recorded is not None else status.get("upgrade") or {}
    status = {**status, "upgrade": recorded}
    offsets = None
    if revision and (recorded or any(revisions.get(p.name) != revision for p in pods)):
        # A roll deletes pods: decide on the API's list. The index can miss a pod
        # recreated under the same name (its old copy's deletion seen last).
        raw = await ctx.api.list(Ref("v1", "Pod", ref.namespace), rnd.selector)
        pods = [PodInfo.of(p) for p in raw]
        revisions = {p["metadata"]["name"]:
                     (p["metadata"].get("labels") or {}).get(REVISION_LABEL, "")
                     for p in raw}
        if spec.upgradePolicy.strategy != "Manual" and not spec.upgrade.paused:
            offsets = await max_offsets(driver, ref, spec, status, pods)
    step = plan_upgrade(spec, ref.name, revision, pods, revisions, status, time.time(),
                        offsets, resume)
    now = ctx.clock()
    events = list(step.events)
    failed = None
    if step.switchover_to:
        broker_id, why_not = switchover_target(step.switchover_to, status)
        if broker_id is not None:
            try:
                await rnd.probe.switchover(spec.clusterName, spec.broker_name(ref.name),
                                           broker_id)
            except Exception as exc:
                why_not = f"controller refused: {exc}"
        if why_not:
            failed = f"upgrade: switchover to {step.switchover_to} failed: {why_not}"
    if step.transfer_to:
        master = str(status.get("masterPod"))
        try:
            await driver.transfer_leadership(
                broker_addr(ref.name, ref.namespace, spec, master),
                f"n{int(step.transfer_to.rsplit('-', 1)[1])}")
        except Exception as exc:
            failed = f"upgrade: leadership transfer to {step.transfer_to} failed: {exc}"
        else:
            # no pod changes readiness in a handover: read the new leader quickly
            rnd.sub.poller.hurry()
    if failed is not None:
        # not recorded as asked: the next round asks again (one Event per distinct error)
        if failed != memo.handover_failed:
            ctx.log.info("%s/%s: %s", ref.namespace, ref.name, failed)
            await ctx.api.post_event(build_event(body, "Warning", REASON_UPGRADE, failed,
                                                 now))
        memo.handover_failed = failed
        step = UpgradeStep(condition=(True, "Waiting", failed))
        events = []
    else:
        memo.handover_failed = None
    if step.delete:
        await ctx.api.delete(Ref("v1", "Pod", ref.namespace, step.delete))
    patch: dict[str, Any] = {}
    if step.status is not None and differs(step.status, recorded):
        patch["upgrade"] = merge_patch(recorded, step.status) if step.status else None
    await ctx.write_with_condition(ref, status, patch, "Upgrading", step.condition)
    if step.status is not None:
        memo.recorded = dict(step.status)
    if step.clear_resume:
        await ctx.api.patch(
            ref, {"metadata": {"annotations": {names.ANNOTATION_UPGRADE: None}}})
    for kind, message in events:
        ctx.log.info("%s/%s: %s", ref.namespace, ref.name, message)
        await ctx.api.post_event(build_event(body, kind, REASON_UPGRADE, message, now))


async def max_offsets(
    driver: UpgradeDriver, ref: Ref, spec: BrokerGroupSpec, status: Mapping[str, Any],
    pods: list[PodInfo],
) -> dict[str, int]:
    """Commitlog max offset per pod. The master is asked first: a slave read after it
    is not behind by the writes that happened in between."""
    master = status.get("masterPod")
    order = sorted(pods, key=lambda p: (p.name != master, p.name))
    addrs = {broker_addr(ref.name, ref.namespace, spec, p.name): p.name for p in order}
    answers = await driver.max_offsets(list(addrs))
    return {addrs[a]: offset for a, offset in answers.items()}
