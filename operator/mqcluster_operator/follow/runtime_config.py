"""Runtime config: changed runtime keys pushed to the running brokers (the pod template's
hash leaves them out, so no pod restarts for them; a pod started later reads the
ConfigMap). ``runtime_config_plan`` says what to push; ``runtime_config_driver`` pushes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import conditions
from ..events import REASON_CONFIG, build_event
from ..manifests.broker import runtime_config as desired_runtime_config
from .context import Context, Round, broker_addr, merge_patch
from .runtime_config_driver import RuntimeConfigDriver
from .runtime_config_plan import runtime_changes


@dataclass
class RuntimeConfigMemo:
    applied: dict[str, str] | None = None
    """What this follower last recorded in ``status.appliedRuntimeConfig``: as with
    ``status.upgrade``, the only writer remembers better than a lagging index."""
    errors: list[str] = field(default_factory=list)
    """The errors of the last push (one Event per distinct list)."""


async def runtime_config(ctx: Context, memo: RuntimeConfigMemo, driver: RuntimeConfigDriver,
                         rnd: Round, status: Mapping[str, Any]) -> None:
    body, ref, spec = rnd.body, rnd.ref, rnd.spec
    desired = desired_runtime_config(spec)
    applied = memo.applied if memo.applied is not None \
        else status.get("appliedRuntimeConfig")
    changes = runtime_changes(desired, applied)
    if changes is None:
        return
    if changes:
        brokers = [broker_addr(ref.name, ref.namespace, spec, i)
                   for i in range(spec.replicas)]
        errors = await driver.update_config(brokers, changes)
        if errors:
            if errors != memo.errors:
                message = f"applying {sorted(changes)} without a restart failed:" \
                          f" {'; '.join(errors)}"
                await ctx.api.post_event(build_event(body, "Warning", REASON_CONFIG,
                                                     message, ctx.clock()))
            memo.errors = errors
            return
        listed = ", ".join(f"{k}={v}" for k, v in sorted(changes.items()))
        await ctx.api.post_event(build_event(
            body, "Normal", REASON_CONFIG, f"applied {listed} to every broker without a"
                                           f" restart", ctx.clock()))
    memo.errors = []
    await ctx.api.write_status(ref, {"appliedRuntimeConfig": merge_patch(
        applied or {}, desired)}, conditions.FOLLOWER)
    memo.applied = dict(desired)
