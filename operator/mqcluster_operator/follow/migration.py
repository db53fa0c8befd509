"""DLedger-to-Controller migration: one step per round, planned by ``migration_plan``
from what the cluster shows (``migration_facts``); the brokers' side is
``migration_driver``."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from mqcluster.protocol.election import Election

from .. import conditions, names
from ..events import build_event
from ..k8s import Ref
from ..reconcile import controller_ref
from .context import Context, Round, broker_addr
from .migration_driver import MigrationDriver
from .migration_plan import FINAL, MigrationFacts, migrates_first, plan_migration


async def migrate(ctx: Context, driver: MigrationDriver, rnd: Round, status: dict[str, Any],
                  election: Election) -> bool:
    """One step of a DLedger-to-Controller migration; True while one is under way
    (restarts and upgrades wait for it)."""
    body, ref, spec = rnd.body, rnd.ref, rnd.spec
    meta = body["metadata"]
    annotation = (meta.get("annotations") or {}).get(names.ANNOTATION_MIGRATION)
    recorded = status.get("migration") or None
    applied = status.get("appliedMode")
    if recorded is None and not (spec.mode == "Controller" and applied == "DLedger"):
        return False
    facts = await migration_facts(ctx, driver, rnd, status, recorded, election)
    step = plan_migration(spec, applied, recorded, annotation, facts)
    if step is None:
        return False
    brokers = [broker_addr(ref.name, ref.namespace, spec, i) for i in range(spec.replicas)]
    if step.action is not None:
        await driver.set_writes(brokers, on=step.action == "writes_on")
    patch: dict[str, Any] = {}
    if step.status is not None:
        patch["migration"] = step.status or None
    await ctx.write_with_condition(ref, status, patch, "Migrating", step.condition)
    if step.clear_annotation:
        await ctx.api.patch(
            ref, {"metadata": {"annotations": {names.ANNOTATION_MIGRATION: None}}})
    if step.event is not None:
        ctx.log.info("%s/%s: %s", ref.namespace, ref.name, step.event[1])
        await ctx.api.post_event(build_event(body, step.event[0], "Migration",
                                             step.event[1], ctx.clock()))
    current = (step.status if step.status is not None else recorded) or {}
    return bool(current) and current.get("step") not in FINAL


async def migration_facts(
    ctx: Context, driver: MigrationDriver, rnd: Round, status: Mapping[str, Any],
    recorded: Mapping[str, Any] | None, election: Election,
) -> MigrationFacts:
    body, spec = rnd.body, rnd.spec
    ref = controller_ref(body)
    controller = (await ctx.reads.get(Ref(names.API_VERSION, "Controller", *ref))
                  if ref else None)
    ready = conditions.get_condition(
        ((controller or {}).get("status") or {}).get("conditions") or [], "Ready") or {}
    leader = status.get("masterPod")
    lag = None
    step = (recorded or {}).get("step")
    if leader and step in (None, "Draining") \
            and spec.migration.drainPolicy == "WaitForConsumers":
        lag = await driver.lag(broker_addr(
            body["metadata"]["name"], body["metadata"]["namespace"], spec, leader))
    meta = body["metadata"]
    behind = None
    if leader and step == "Draining":
        behind = await metadata_behind(driver, rnd, str(leader))
    others = [o for o in await ctx.reads.list(
                  Ref(names.API_VERSION, "BrokerGroup", meta["namespace"]), {})
              if (o.get("spec") or {}).get("clusterName", "DefaultCluster")
              == spec.clusterName]
    return MigrationFacts(
        waiting_for=migrates_first(meta["name"], others) if step is None else None,
        now=time.time(),
        controller_ready=ready.get("status") == "True",
        ready_replicas=int(status.get("readyReplicas") or 0),
        leader=leader,
        lag=lag,
        pods=len(rnd.pods),
        registered=sum(1 for r in election.replicas if r.broker_id is not None and r.alive),
        master=leader if step not in (None, "Draining", "Stopping") else None,
        sync_state_set=len(status.get("syncStateSet") or []),
        metadata_behind=behind,
    )


async def metadata_behind(driver: MigrationDriver, rnd: Round,
                          leader: str) -> tuple[str, ...] | None:
    """The pods whose topics or subscription groups differ from the leader's."""
    meta = rnd.body["metadata"]
    name, ns = meta["name"], meta["namespace"]
    addrs = {names.pod(name, i): broker_addr(name, ns, rnd.spec, i)
             for i in range(rnd.spec.replicas)}
    if leader not in addrs:
        return None
    followers = [pod for pod in addrs if pod != leader]
    behind = await driver.metadata_behind(addrs[leader], [addrs[p] for p in followers])
    if behind is None:
        return None
    return tuple(p for p in followers if addrs[p] in behind)
