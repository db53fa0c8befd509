"""DLedger-to-Controller migration of one broker group, as pure planning.

The procedure of RocketMQ's controller-mode deployment guide (its upgrade notes,
"升级注意事项", from DLedger to Controller): a DLedger commitlog cannot be read by controller-mode
brokers, so the group stops taking writes, its consumers drain it, the pods
stop, each store is cleared except its topic and subscription-group configs,
and the replicas start again in controller mode with fresh epoch files.

``plan_migration`` takes what the group looks like now (``MigrationFacts``,
the recorded ``status.migration`` and the annotation) and returns one step:
the broker-side action to run (``writes_off``/``writes_on``), how the
StatefulSet is to be rendered, the new ``status.migration`` and the
``Migrating`` condition. The executor runs the action first and records the
new status after it, so a restart between the two repeats an idempotent
action instead of skipping it. Until ``Stopping`` an abort (annotation
``mqcluster.io/migration: abort``, or ``spec.mode`` set back to DLedger)
restores writes and leaves the DLedger group untouched; from ``Stopping`` on
the stores are being cleared and the migration only goes forward.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..models import BrokerGroupSpec

Action = Literal["writes_off", "writes_on"]

DRAINING = "Draining"
STOPPING = "Stopping"
RESTARTING = "Restarting"
DONE = "Done"
FAILED = "Failed"
ABORTED = "Aborted"
# Steps after which the stores may already be cleared: no way back to DLedger.
FORWARD_ONLY = frozenset({STOPPING, RESTARTING, DONE})
# Steps that end a migration until a person (or a spec change) starts another.
FINAL = frozenset({DONE, FAILED, ABORTED})


@dataclass(frozen=True)
class MigrationFacts:
    """What the executor learned this round (None where it could not be learned)."""

    now: float
    controller_ready: bool = False
    ready_replicas: int = 0
    leader: str | None = None
    lag: int | None = None
    """Messages the group's subscription groups have still to consume."""
    pods: int = 0
    """Pods of the group that still exist (Stopping waits for 0)."""
    registered: int = 0
    """Replicas that registered with the controller after the restart."""
    master: str | None = None
    sync_state_set: int = 0
    waiting_for: str | None = None
    """Another group of the cluster that migrates first (one group at a time)."""
    metadata_behind: tuple[str, ...] | None = None
    """Replicas whose topics or subscription groups differ from the leader's (None:
    not known). Followers copy them every few seconds and the store clear keeps each
    pod's own copy, so a stale follower elected master later would lose a topic."""


@dataclass(frozen=True)
class MigrationStep:
    action: Action | None = None
    status: dict[str, Any] | None = None
    """New ``status.migration``; None leaves it as it is."""
    condition: tuple[bool, str, str] | None = None
    """(Migrating?, reason, message)."""
    event: tuple[str, str] | None = None
    """(type, message) of a Migration event."""
    clear_annotation: bool = False


def plan_migration(
    spec: BrokerGroupSpec,
    applied_mode: str | None,
    recorded: Mapping[str, Any] | None,
    annotation: str | None,
    facts: MigrationFacts,
) -> MigrationStep | None:
    """One step of the migration, or None when there is none to run or to keep."""
    state = dict(recorded or {})
    step = state.get("step")
    wanted = spec.mode == "Controller" and applied_mode == "DLedger"
    if not step:
        return begin(spec, facts, annotation) if wanted else None
    if step in FINAL:
        return final(spec, state, wanted, annotation, facts)
    if step not in FORWARD_ONLY and (annotation == "abort" or spec.mode == "DLedger"):
        why = "aborted by annotation" if annotation == "abort" else "spec.mode is DLedger again"
        return MigrationStep(
            action="writes_on",
            status={**state, "step": ABORTED, "since": facts.now, "progress": why},
            condition=(False, "Aborted", f"migration {why}; writes are back on"),
            event=("Normal", f"migration {why}; the DLedger group is untouched"),
            clear_annotation=annotation == "abort",
        )
    refused = None
    if annotation == "abort":
        refused = ("Warning", f"abort refused at step {step}: the stores are being cleared,"
                              " the migration only goes forward")
    if step == DRAINING:
        return drain(spec, state, facts)
    if step == STOPPING:
        if facts.pods > 0:
            return MigrationStep(status=None, event=refused,
                                 clear_annotation=refused is not None,
                                 condition=(True, STOPPING, f"{facts.pods} pod(s) still running"))
        return MigrationStep(
            status={**state, "step": RESTARTING, "since": facts.now,
                    "progress": f"0/{spec.replicas} replicas registered"},
            condition=(True, RESTARTING, "starting in controller mode on cleared stores"),
            event=("Normal", "pods stopped; starting in controller mode, stores cleared"
                             " except " + ", ".join(spec.migration.keepFiles)),
            clear_annotation=refused is not None,
        )
    # RESTARTING: wait for a full controller-mode group, then writes on.
    progress = (f"{facts.registered}/{spec.replicas} replicas registered, "
                f"SyncStateSet {facts.sync_state_set}/{spec.replicas}"
                + ("" if facts.master else ", no master yet"))
    if facts.registered < spec.replicas or not facts.master \
            or facts.sync_state_set < spec.replicas:
        changed = progress != state.get("progress")
        return MigrationStep(event=refused,
                             clear_annotation=refused is not None,
                             status={**state, "progress": progress} if changed else None,
                             condition=(True, RESTARTING, progress))
    return MigrationStep(
        action="writes_on",
        status={**state, "step": DONE, "since": facts.now, "progress": progress},
        condition=(False, "Completed", f"migrated to controller mode; master {facts.master}"),
        event=("Normal", f"migration completed: master {facts.master}, writes back on"),
        clear_annotation=refused is not None,
    )


def begin(spec: BrokerGroupSpec, facts: MigrationFacts,
          annotation: str | None) -> MigrationStep:
    if facts.waiting_for:
        return MigrationStep(condition=(
            False, "WaitingForGroup",
            f"{facts.waiting_for} migrates first; one group at a time keeps the cluster serving"))
    if not facts.controller_ready:
        return MigrationStep(condition=(
            False, "ControllerNotReady", "the referenced Controller is not Ready"))
    if facts.ready_replicas < spec.replicas or not facts.leader:
        why = (f"{facts.ready_replicas}/{spec.replicas} replicas ready"
               + ("" if facts.leader else ", no leader"))
        return MigrationStep(condition=(False, "GroupDegraded", why))
    mid = f"m{int(facts.now)}"
    return MigrationStep(
        action="writes_off",
        status={"step": DRAINING, "id": mid, "since": facts.now, "startedAt": facts.now,
                "progress": "writes off"},
        condition=(True, DRAINING, "writes off; waiting for consumers to drain the group"),
        event=("Normal", "migration to controller mode started: writes off"),
        clear_annotation=annotation == "start",
    )


def drain(spec: BrokerGroupSpec, state: dict[str, Any],
          facts: MigrationFacts) -> MigrationStep:
    policy = spec.migration
    elapsed = facts.now - float(state.get("since", facts.now))
    if policy.drainPolicy == "RetentionWindow":
        left = policy.retentionWindowSeconds - elapsed
        done, progress = left <= 0, f"{max(0, int(left))}s of the retention window left"
    else:
        done = facts.lag == 0
        progress = ("consumer lag unknown" if facts.lag is None
                    else f"{facts.lag} message(s) left to consume")
    if done and facts.metadata_behind != ():
        done = False
        progress = ("drained; comparing the replicas' topics and subscription groups"
                    " with the leader's" if facts.metadata_behind is None
                    else "drained; waiting for " + ", ".join(facts.metadata_behind)
                    + " to copy the leader's topics and subscription groups")
    if not done and policy.drainPolicy == "WaitForConsumers" \
            and elapsed > policy.drainTimeoutSeconds:
        why = f"consumers did not drain within {policy.drainTimeoutSeconds}s ({progress})"
        return MigrationStep(
            action="writes_on",
            status={**state, "step": FAILED, "since": facts.now, "progress": why},
            condition=(False, "DrainTimeout", why + "; writes are back on"),
            event=("Warning", f"migration failed: {why}; the DLedger group is untouched"),
        )
    if done:
        return MigrationStep(
            status={**state, "step": STOPPING, "since": facts.now, "progress": "stopping pods"},
            condition=(True, STOPPING, "drained; stopping the DLedger pods"),
            event=("Normal", f"drained ({progress}); stopping the pods"),
        )
    changed = progress != state.get("progress")
    # Writes off again each round: a replica restarted meanwhile came back writable.
    return MigrationStep(action="writes_off",
                         status={**state, "progress": progress} if changed else None,
                         condition=(True, DRAINING, progress))


def final(spec: BrokerGroupSpec, state: dict[str, Any], wanted: bool,
          annotation: str | None, facts: MigrationFacts) -> MigrationStep | None:
    step = state["step"]
    if step == DONE:
        return None
    if not wanted:
        return MigrationStep(status={}) if spec.mode == "DLedger" else None
    if annotation == "start":
        return begin(spec, facts, annotation)
    reason = "DrainTimeout" if step == FAILED else "Aborted"
    return MigrationStep(condition=(
        False, reason, f"{state.get('progress', step)}; annotate"
                       " mqcluster.io/migration=start to try again"))


@dataclass(frozen=True)
class Rendering:
    """How the reconciler renders a group while a migration is recorded in its status."""

    mode: str
    stopped: bool = False
    """StatefulSet replicas 0 (the DLedger pods stop before the stores are cleared)."""
    clear_store: str | None = None
    """Migration id: each pod clears its store once for it before the broker starts."""


def migrates_first(me: str, others: Iterable[Mapping[str, Any]]) -> str | None:
    """The other group (of the same cluster) that migrates before ``me``: one that is
    migrating now, or one that waits to start and comes first by name."""
    for other in sorted(others, key=lambda o: o["metadata"]["name"]):
        name = other["metadata"]["name"]
        if name == me:
            continue
        status = other.get("status") or {}
        step = (status.get("migration") or {}).get("step")
        if step and step not in FINAL:
            return str(name)
        wants = ((other.get("spec") or {}).get("mode") == "Controller"
                 and status.get("appliedMode") == "DLedger")
        if not step and wants and name < me:
            return str(name)
    return None


def rendering(spec: BrokerGroupSpec, applied_mode: str | None,
              recorded: Mapping[str, Any] | None) -> Rendering:
    step = (recorded or {}).get("step")
    mid = str((recorded or {}).get("id") or "")
    if step in (RESTARTING, DONE):
        # Kept after Done (a no-op per id) so the pod template does not change again.
        return Rendering("Controller", clear_store=mid)
    if step == STOPPING:
        return Rendering("DLedger", stopped=True)
    if applied_mode == "DLedger" and spec.mode == "Controller":
        return Rendering("DLedger")
    return Rendering(spec.mode)
