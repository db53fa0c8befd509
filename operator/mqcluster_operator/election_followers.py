"""The steps of the election-following daemons (I/O through k8s.Api and a ControllerProbe)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from . import conditions, metrics, names
from .events import (
    REASON_CONFIG,
    REASON_RESTART,
    REASON_SWITCHOVER,
    REASON_UPGRADE,
    build_event,
)
from .follow.election_plan import (
    ControllerProbe,
    Election,
    PodInfo,
    ProbeError,
    plan_follow,
    pod_for_address,
    switchover_target,
)
from .follow.election_poller import ElectionHub, Subscription
from .follow.election_probes import ProbeTarget
from .follow.epochs_plan import ReplicaEpochs, find_conflicts, plan_epochs
from .follow.migration_driver import AdminDriver, MigrationDriver
from .follow.migration_plan import FINAL, MigrationFacts, migrates_first, plan_migration
from .follow.restart_plan import plan_restart
from .follow.runtime_config_plan import runtime_changes
from .follow.scaling_plan import UNDER_WAY, ScaleFacts, ScaleStep, plan_scale
from .follow.upgrade_driver import AdminUpgradeDriver, UpgradeDriver
from .follow.upgrade_plan import RESUME, REVISION_LABEL, UpgradeStep, plan_upgrade
from .k8s import Api, Ref, differs
from .manifests import Owner, SpecError, controller_view
from .manifests.broker import namesrv_addr, runtime_config
from .manifests.meta import selector_labels
from .models import BrokerGroupSpec, ControllerSpec
from .reconcile import controller_ref, parse, paused, view_of
from .views import Reads

ProbeFactory = Callable[[ProbeTarget], ControllerProbe]
TARGET_TTL = 30.0
WRITE_MEMORY = 30.0  # how long an own status write may stay unseen by the index
OWN_RECORDS = ("migration", "scaling", "epochConflicts")  # status fields only followers write
EPOCH_INTERVAL = 2.0  # seconds between two reads of the replicas' epoch entries
Clock = Callable[[], str]


class ProbeCache:
    """One probe per target; replaced when the target changes (e.g. controllers scaled)."""

    def __init__(self, factory: ProbeFactory) -> None:
        self._factory = factory
        self._target: ProbeTarget | None = None
        self._probe: ControllerProbe | None = None

    async def get(self, target: ProbeTarget) -> ControllerProbe:
        if self._probe is None or target != self._target:
            await self.close()
            self._probe, self._target = self._factory(target), target
        return self._probe

    async def close(self) -> None:
        if self._probe is not None:
            await self._probe.close()
            self._probe = None


def merged(status: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(status)
    out.update(patch)
    return out


class BrokerGroupFollower:
    """The steps of one BrokerGroup's daemon; elections come from the shared ElectionHub.

    ``step`` runs every ``follow_interval`` and whenever the poll of the group's
    controllers reports a change (``wait``). A change-triggered step first
    relabels the pods (``relabel``: one list, the patches), then does the rest.
    The probe target (which reads the Controller) is looked up again when the
    group's spec changes and at least every ``TARGET_TTL`` seconds.
    """

    def __init__(
        self, api: Api, hub: ElectionHub, clock: Clock, logger: logging.Logger | Any,
        reads: Reads | None = None, driver: MigrationDriver | None = None,
        upgrades: UpgradeDriver | None = None,
    ) -> None:
        self.api = api
        self.reads: Reads = reads or api
        self.driver: MigrationDriver = driver or AdminDriver()
        self.upgrades: UpgradeDriver = upgrades or AdminUpgradeDriver()
        self._upgrade: dict[str, Any] | None = None
        self._config_errors: list[str] = []
        self._runtime: dict[str, str] | None = None
        self._handover_failed: str | None = None
        self.hub = hub
        self.clock = clock
        self.log = logger
        self.sub: Subscription | None = None
        self._poked = asyncio.Event()
        self._key: tuple[ProbeTarget, str] | None = None
        self._selector: dict[str, str] | None = None
        self._target_at = float("-inf")
        self._generation: tuple[int | None, str] | None = None
        # The status fields this follower last wrote. It is their only writer, so while
        # it lives its memory is newer than an index that has not yet seen the write.
        self._wrote: dict[str, Any] = {}
        self._wrote_at = float("-inf")
        # The conditions this follower last wrote, by type: each part of a step (follow,
        # migrate, upgrade) applies all the follower's entries, so one computed from an
        # index that lags behind would put back an entry another part just replaced.
        self._conditions: dict[str, dict[str, Any]] = {}
        # Likewise the records only this follower writes: planning a step from an
        # older record would repeat the step before it.
        self._records: dict[str, Any] = {}
        self._epochs: dict[str, ReplicaEpochs] = {}
        self._epochs_at = float("-inf")
        # The wipe carried out last and when: its annotation, cleared at once, may still
        # be in an index that lags behind, and must not wipe the recreated pod.
        self._wiped: tuple[str, float] = ("", float("-inf"))

    def remembered(self, status: Mapping[str, Any]) -> dict[str, Any]:
        """``status`` with the migration record and conditions this follower wrote."""
        out = {**status, **self._records}
        if self._conditions:
            out["conditions"] = [
                c for c in status.get("conditions") or [] if c.get("type") not in self._conditions
            ] + list(self._conditions.values())
        return out

    async def write_with_condition(
        self, ref: Ref, status: Mapping[str, Any], patch: dict[str, Any], kind: str,
        condition: tuple[bool | None, str, str] | None,
    ) -> None:
        """Writes ``patch`` and, when given and changed, the ``kind`` condition."""
        if condition is not None:
            conds = conditions.set_condition(status.get("conditions", []), kind, *condition,
                                             self.clock())
            if differs(conds, status.get("conditions")):
                patch["conditions"] = conds
        if patch:
            await self.write_status(ref, patch)

    async def write_status(self, ref: Ref, patch: Mapping[str, Any],
                           fields_first: bool = False) -> None:
        await self.api.write_status(ref, patch, conditions.FOLLOWER, fields_first)
        self._records.update({k: v for k, v in patch.items() if k in OWN_RECORDS})
        for cond in patch.get("conditions") or []:
            if cond.get("type") in conditions.FOLLOWER.types:
                self._conditions[cond["type"]] = dict(cond)

    async def close(self) -> None:
        if self.sub is not None:
            sub, self.sub, self._key = self.sub, None, None
            await sub.close()

    async def subscribe(self, target: ProbeTarget, broker_name: str) -> Subscription:
        if self.sub is None or self._key != (target, broker_name):
            await self.close()
            self.sub = self.hub.subscribe(target, broker_name)
            self._key = (target, broker_name)
        return self.sub

    def poke(self) -> None:
        """A pod of the group changed readiness: step now, and poll the election quickly
        (a killed master's pod turning NotReady is when a DLedger election happens)."""
        self._poked.set()
        if self.sub is not None:
            self.sub.poller.hurry()

    async def wait(self, stopped: Any, timeout: float) -> bool:
        """Until the group's election changes (True), ``timeout`` passes, a pod changes
        readiness (``poke``) or the daemon stops."""
        sub = self.sub
        if (sub is None or not sub.changed.is_set()) and not self._poked.is_set():
            async def stop() -> None:
                await stopped.wait(timeout)

            waiters: list[asyncio.Future[Any]] = [asyncio.ensure_future(stop()),
                                                  asyncio.ensure_future(self._poked.wait())]
            if sub is not None:
                waiters.append(asyncio.ensure_future(sub.changed.wait()))
            try:
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    waiter.cancel()
                for waiter in waiters:
                    with contextlib.suppress(asyncio.CancelledError):
                        await waiter
        self._poked.clear()
        if sub is None or not sub.changed.is_set():
            return False
        sub.changed.clear()
        return True

    async def target(self, body: Mapping[str, Any], spec: BrokerGroupSpec) -> ProbeTarget | None:
        """Where the election is read: the mode the pods run in (a group being migrated
        runs DLedger until its stores are cleared)."""
        meta = body["metadata"]
        if running_mode(body, spec) == "Controller":
            ref = controller_ref(body)
            if ref is None:
                return None
            controller = await self.reads.get(Ref(names.API_VERSION, "Controller", ref[0], ref[1]))
            view = view_of(controller) if controller else None
            return ProbeTarget(controller_addrs=view.controller_addr) if view else None
        health = tuple(
            (
                broker_addr(meta["name"], meta["namespace"], spec, i),
                f"http://{names.pod_dns(meta['name'], i, meta['namespace'])}:"
                f"{spec.ports.metrics}/health",
            )
            for i in range(spec.replicas)
        )
        return ProbeTarget(health=health)

    async def relabel(self, live: Mapping[str, Any]) -> None:
        """Point the Service at the newly elected master before anything else is read or written.

        Labels depend only on the election and the pods; status, events and the
        rest follow in the step.
        """
        sub, selector = self.sub, self._selector
        election = sub.latest if sub is not None else None
        if not isinstance(election, Election) or selector is None or paused(live):
            return
        ns = live["metadata"]["namespace"]
        pods = [PodInfo.of(p) for p in await self.reads.list(Ref("v1", "Pod", ns), selector)]
        plan = plan_follow({}, election, pods, self.clock())
        for pod, role in plan.relabels:
            await self.api.patch(Ref("v1", "Pod", ns, pod),
                                 {"metadata": {"labels": {names.LABEL_ROLE: role}}})

    async def step(self, live: Mapping[str, Any], changed: bool = False) -> None:
        with metrics.follow_timer("BrokerGroup"):
            await self._step(live, changed)

    async def _step(self, live: Mapping[str, Any], changed: bool = False) -> None:
        """One round; reads the resource from ``reads`` (kopf's live body lags behind long
        handlers; the indices follow the watch)."""
        if changed:
            await self.relabel(live)
        body = await self.reads.get(Ref.of(live))
        if body is None or paused(body):
            await self.close()
            return
        spec, _ = parse(BrokerGroupSpec, body.get("spec"))
        if spec is None:
            await self.close()
            return
        meta = body["metadata"]
        ns, name = meta["namespace"], meta["name"]
        ref = Ref(names.API_VERSION, "BrokerGroup", ns, name)
        status = dict(body.get("status") or {})
        status.update({k: v for k, v in self._wrote.items() if k != "conditions"})
        status = self.remembered(status)
        broker_name = spec.broker_name(name)
        generation = meta.get("generation")
        recent = time.monotonic() - self._target_at < TARGET_TTL
        generation = (generation, running_mode(body, spec))
        if self._key is not None and self._key[1] == broker_name and (
                changed or (recent and generation == self._generation)):
            target: ProbeTarget | None = self._key[0]
        else:
            target = await self.target(body, spec)
            self._target_at, self._generation = time.monotonic(), generation
        if target is None:
            await self.close()
            return
        sub = await self.subscribe(target, broker_name)
        latest = sub.latest
        if latest is None:
            return
        now = self.clock()
        if isinstance(latest, ProbeError):
            metrics.PROBE_FAILURES.labels(ns, name).inc()
            conds = conditions.set_condition(
                status.get("conditions", []), "MasterElected", None, "ProbeFailed", str(latest),
                now,
            )
            if differs(conds, status.get("conditions")):
                await self.write_status(ref, {"conditions": conds})
            # A migration stops every pod on purpose: no broker answers then, and the
            # migration must still see them gone to go on.
            if not (status.get("migration") or {}).get("step"):
                return
        self._selector = selector_labels(Owner.from_body(body), "broker")
        raw_pods = await self.reads.list(Ref("v1", "Pod", ns), self._selector)
        revisions = {
            p["metadata"]["name"]: (p["metadata"].get("labels") or {}).get(REVISION_LABEL, "")
            for p in raw_pods
        }
        pods = [PodInfo.of(p) for p in raw_pods]
        if isinstance(latest, ProbeError):
            await self.migrate(body, ref, spec, status, pods, Election(None))
            return
        status = await self.follow(body, ref, status, latest, pods, now)
        if sub.changed.is_set():
            return  # a newer election waits: follow it first, the rest in the next round
        if await self.migrate(body, ref, spec, status, pods, latest):
            return
        # Each part below starts from what the parts before it wrote.
        await self.check_epochs(body, ref, spec, self.remembered(status), pods)
        if await self.scale(body, ref, spec, self.remembered(status), pods, sub.probe):
            return
        await self.switchover(body, ref, spec, self.remembered(status), sub.probe)
        await self.runtime_config(body, ref, spec, self.remembered(status))
        if await self.restart(body, ref, spec, self.remembered(status), pods):
            return
        await self.upgrade(body, ref, spec, self.remembered(status), pods, revisions, sub.probe)

    async def check_epochs(self, body: Mapping[str, Any], ref: Ref, spec: BrokerGroupSpec,
                           status: Mapping[str, Any], pods: list[PodInfo]) -> None:
        """Reads the replicas' epoch entries (for ``status.replicas``, written by the next
        ``follow``), reports those that conflict with the master's and wipes one a
        person approved (``mqcluster.io/wipe-replica``)."""
        annotation = (body["metadata"].get("annotations") or {}).get(
            names.ANNOTATION_WIPE_REPLICA)
        if annotation == self._wiped[0] and time.monotonic() - self._wiped[1] < WRITE_MEMORY:
            annotation = None
        if status.get("appliedMode") != "Controller" or (
                not annotation and time.monotonic() - self._epochs_at < EPOCH_INTERVAL):
            return
        self._epochs_at = time.monotonic()
        ns = ref.namespace
        addrs = {p.name: broker_addr(ref.name, ns, spec, p.name) for p in pods}
        answers = await self.driver.epochs(list(addrs.values()))
        self._epochs = {pod: answers[a] for pod, a in addrs.items() if a in answers}
        master = status.get("masterPod")
        if master not in self._epochs and not annotation:
            return  # nothing to compare with
        found = find_conflicts(master, self._epochs)
        # Without the master's entries nothing was compared: recorded conflicts stay.
        compared = list(self._epochs) if master in self._epochs else []
        step = plan_epochs(found, compared, status.get("epochConflicts") or [],
                           master, sorted(addrs), annotation)
        now = self.clock()
        if step.wipe is not None:
            # The claim goes first: the pod recreated by the StatefulSet gets a new one.
            await self.api.delete(Ref("v1", "PersistentVolumeClaim", ns,
                                      f"data-{step.wipe}"))
            await self.api.delete(Ref("v1", "Pod", ns, step.wipe))
            self._epochs.pop(step.wipe, None)
            self._wiped = (step.wipe, time.monotonic())
        patch: dict[str, Any] = {}
        if step.conflicts is not None:
            patch["epochConflicts"] = step.conflicts
        await self.write_with_condition(ref, status, patch, "Degraded", step.condition)
        if step.clear_annotation:
            await self.api.patch(
                ref, {"metadata": {"annotations": {names.ANNOTATION_WIPE_REPLICA: None}}})
        for kind, message in step.events:
            self.log.info("%s/%s: %s", ns, ref.name, message)
            await self.api.post_event(build_event(body, kind, "EpochConflict", message, now))

    async def scale(self, body: Mapping[str, Any], ref: Ref, spec: BrokerGroupSpec,
                    status: Mapping[str, Any], pods: list[PodInfo],
                    probe: ControllerProbe) -> bool:
        """One step of a scale-down, or the catch-up progress of replicas outside the
        SyncStateSet (controller mode); True while a scale-down moves the master or
        removes pods (switchovers, restarts and upgrades wait for it)."""
        if status.get("appliedMode") != "Controller":
            return False
        members = {str(r.get("pod")): r for r in status.get("replicas") or []}
        facts = ScaleFacts(
            name=ref.name, master=status.get("masterPod"),
            sync_state_set=list(status.get("syncStateSet") or []),
            pods=[p.name for p in pods],
            broker_ids={pod: int(r["brokerId"]) for pod, r in members.items()
                        if r.get("brokerId") is not None},
            addresses={pod: str(r["address"]) for pod, r in members.items()
                       if r.get("address")},
            offsets={pod: e.max_offset for pod, e in self._epochs.items()},
            learners=spec.asyncLearnerReplicas)
        step = plan_scale(spec.replicas, status.get("appliedReplicas"), spec.minInSyncReplicas,
                          spec.storage.reclaimPolicy, status.get("scaling"), facts)
        if step is None:
            return False
        condition = step.condition
        try:
            if step.switchover_to is not None:
                await probe.switchover(spec.clusterName, spec.broker_name(ref.name),
                                       facts.broker_ids[step.switchover_to])
            if (step.retire or step.unregister) and self._key is not None:
                await self.driver.retire(self._key[0].controller_addrs,
                                         await self.namesrvs(body, spec), spec.clusterName,
                                         spec.broker_name(ref.name), step.retire,
                                         step.unregister)
        except Exception as exc:  # the controller refuses (a stopped broker still alive)
            self.log.info("%s/%s: scaling waits: %s", ref.namespace, ref.name, exc)
            condition = (True, "Retiring" if step.retire else "SwitchingOver",
                         f"waiting for the controller: {exc}")
            step = ScaleStep(condition=condition)
        for claim in step.delete_claims:
            await self.api.delete(Ref("v1", "PersistentVolumeClaim", ref.namespace, claim))
        patch: dict[str, Any] = {}
        if step.status is not None:
            patch["scaling"] = step.status or None
        await self.write_with_condition(ref, status, patch, "Scaling", condition)
        if step.event is not None:
            self.log.info("%s/%s: %s", ref.namespace, ref.name, step.event[1])
            await self.api.post_event(build_event(body, step.event[0], "Scaling",
                                                  step.event[1], self.clock()))
        current = (step.status if step.status is not None else status.get("scaling")) or {}
        return current.get("step") in UNDER_WAY

    async def namesrvs(self, body: Mapping[str, Any], spec: BrokerGroupSpec) -> list[str]:
        ref = controller_ref(body)
        controller = (await self.reads.get(Ref(names.API_VERSION, "Controller", *ref))
                      if ref else None)
        view = view_of(controller) if controller else None
        try:
            return [a for a in namesrv_addr(spec, view).split(";") if a]
        except SpecError:
            return []

    async def migrate(
        self, body: Mapping[str, Any], ref: Ref, spec: BrokerGroupSpec,
        status: dict[str, Any], pods: list[PodInfo], election: Election,
    ) -> bool:
        """One step of a DLedger-to-Controller migration; True while one is under way
        (restarts and upgrades wait for it). What it writes is merged into ``status``."""
        meta = body["metadata"]
        annotation = (meta.get("annotations") or {}).get(names.ANNOTATION_MIGRATION)
        recorded = status.get("migration") or None
        applied = status.get("appliedMode")
        if recorded is None and not (spec.mode == "Controller" and applied == "DLedger"):
            return False
        facts = await self.migration_facts(body, spec, status, recorded, pods, election)
        step = plan_migration(spec, applied, recorded, annotation, facts)
        if step is None:
            return False
        brokers = [broker_addr(ref.name, ref.namespace, spec, i) for i in range(spec.replicas)]
        if step.action is not None:
            await self.driver.set_writes(brokers, on=step.action == "writes_on")
        patch: dict[str, Any] = {}
        if step.status is not None:
            patch["migration"] = step.status or None
        await self.write_with_condition(ref, status, patch, "Migrating", step.condition)
        if step.clear_annotation:
            await self.api.patch(
                ref, {"metadata": {"annotations": {names.ANNOTATION_MIGRATION: None}}})
        if step.event is not None:
            self.log.info("%s/%s: %s", ref.namespace, ref.name, step.event[1])
            await self.api.post_event(build_event(body, step.event[0], "Migration",
                                                  step.event[1], self.clock()))
        current = (step.status if step.status is not None else recorded) or {}
        return bool(current) and current.get("step") not in FINAL

    async def migration_facts(
        self, body: Mapping[str, Any], spec: BrokerGroupSpec, status: Mapping[str, Any],
        recorded: Mapping[str, Any] | None, pods: list[PodInfo], election: Election,
    ) -> MigrationFacts:
        ref = controller_ref(body)
        controller = (await self.reads.get(Ref(names.API_VERSION, "Controller", *ref))
                      if ref else None)
        ready = conditions.get_condition(
            ((controller or {}).get("status") or {}).get("conditions") or [], "Ready") or {}
        leader = status.get("masterPod")
        lag = None
        step = (recorded or {}).get("step")
        if leader and step in (None, "Draining") \
                and spec.migration.drainPolicy == "WaitForConsumers":
            lag = await self.driver.lag(broker_addr(
                body["metadata"]["name"], body["metadata"]["namespace"], spec, leader))
        meta = body["metadata"]
        behind = None
        if leader and step == "Draining":
            behind = await self.metadata_behind(body, spec, str(leader))
        others = [o for o in await self.reads.list(
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
            pods=len(pods),
            registered=sum(1 for r in election.replicas if r.broker_id is not None and r.alive),
            master=leader if step not in (None, "Draining", "Stopping") else None,
            sync_state_set=len(status.get("syncStateSet") or []),
            metadata_behind=behind,
        )

    async def metadata_behind(self, body: Mapping[str, Any], spec: BrokerGroupSpec,
                              leader: str) -> tuple[str, ...] | None:
        """The pods whose topics or subscription groups differ from the leader's."""
        meta = body["metadata"]
        name, ns = meta["name"], meta["namespace"]
        addrs = {names.pod(name, i): broker_addr(name, ns, spec, i)
                 for i in range(spec.replicas)}
        if leader not in addrs:
            return None
        followers = [pod for pod in addrs if pod != leader]
        behind = await self.driver.metadata_behind(addrs[leader],
                                                   [addrs[p] for p in followers])
        if behind is None:
            return None
        return tuple(p for p in followers if addrs[p] in behind)

    async def follow(
        self, body: Mapping[str, Any], ref: Ref, status: dict[str, Any], election: Election,
        pods: list[PodInfo], now: str,
    ) -> dict[str, Any]:
        started = time.monotonic()
        plan = plan_follow(status, election, pods, now, self._epochs)
        for pod, role in plan.relabels:
            labels = {"metadata": {"labels": {names.LABEL_ROLE: role}}}
            await self.api.patch(Ref("v1", "Pod", ref.namespace, pod), labels)
        if plan.changed and plan.master_pod:
            metrics.RELABEL_SECONDS.observe(time.monotonic() - started)
            metrics.MASTER_CHANGES.labels(ref.namespace, ref.name).inc()
        # Written a moment ago and not yet seen by the index: not again.
        just_written = (plan.status == self._wrote
                        and time.monotonic() - self._wrote_at < WRITE_MEMORY)
        if differs(plan.status, status) and not just_written:
            # status.masterPod before the conditions: it is what a failover changes
            await self.write_status(ref, plan.status, fields_first=plan.changed)
            self._wrote, self._wrote_at = dict(plan.status), time.monotonic()
        if plan.event:
            self.log.info("%s/%s: %s", ref.namespace, ref.name, plan.event[2])
            await self.api.post_event(build_event(body, *plan.event, now))
        return merged(status, plan.status)

    async def switchover(
        self, body: Mapping[str, Any], ref: Ref, spec: BrokerGroupSpec,
        status: Mapping[str, Any], probe: ControllerProbe,
    ) -> None:
        annotations = body["metadata"].get("annotations") or {}
        requested = annotations.get(names.ANNOTATION_SWITCHOVER)
        if not requested:
            return
        now = self.clock()
        broker_id, why_not = switchover_target(requested, status)
        if spec.mode != "Controller":
            broker_id, why_not = None, "switchover needs mode Controller"
        if broker_id is not None:
            try:
                await probe.switchover(spec.clusterName, spec.broker_name(ref.name), broker_id)
            except Exception as exc:
                why_not = f"controller refused: {exc}"
        if why_not:
            event = ("Warning", REASON_SWITCHOVER, f"switchover to {requested} failed: {why_not}")
        else:
            event = ("Normal", REASON_SWITCHOVER, f"switchover to {requested} requested")
        await self.api.patch(
            ref, {"metadata": {"annotations": {names.ANNOTATION_SWITCHOVER: None}}}
        )
        await self.api.post_event(build_event(body, *event, now))

    async def restart(
        self, body: Mapping[str, Any], ref: Ref, spec: BrokerGroupSpec,
        status: Mapping[str, Any], pods: list[PodInfo],
    ) -> bool:
        """One step of a requested restart; True while one is in progress."""
        annotations = body["metadata"].get("annotations") or {}
        requested = annotations.get(names.ANNOTATION_RESTART)
        step = plan_restart(
            requested, status.get("restart"), pods, spec.replicas, status.get("masterPod"),
        )
        busy = bool(requested) and (status.get("restart") or {}).get("completed") != requested
        if step.status is None:
            return busy
        if step.delete:
            await self.api.delete(Ref("v1", "Pod", ref.namespace, step.delete))
        await self.api.patch(ref, {"status": {"restart": step.status}}, "status")
        if step.delete or step.done:
            message = f"restarted pod {step.delete}" if step.delete else "restart completed"
            await self.api.post_event(build_event(body, "Normal", REASON_RESTART, message,
                                                  self.clock()))
        return not step.done

    async def upgrade(
        self, body: Mapping[str, Any], ref: Ref, spec: BrokerGroupSpec,
        status: Mapping[str, Any], pods: list[PodInfo], revisions: Mapping[str, str],
        probe: ControllerProbe,
    ) -> None:
        sts = await self.reads.get(Ref("apps/v1", "StatefulSet", ref.namespace, ref.name))
        revision = ((sts or {}).get("status") or {}).get("updateRevision")
        annotations = body["metadata"].get("annotations") or {}
        resume = annotations.get(names.ANNOTATION_UPGRADE) == RESUME
        # This follower is the only writer of status.upgrade: its memory is newer than an
        # index that has not seen the last write yet (a stale copy could delete twice).
        recorded = self._upgrade if self._upgrade is not None else status.get("upgrade") or {}
        status = {**status, "upgrade": recorded}
        offsets = None
        if revision and (recorded or any(revisions.get(p.name) != revision for p in pods)):
            # A roll deletes pods: decide on the API's list. The index can miss a pod
            # recreated under the same name (its old copy's deletion seen last).
            raw = await self.api.list(Ref("v1", "Pod", ref.namespace), self._selector or {})
            pods = [PodInfo.of(p) for p in raw]
            revisions = {p["metadata"]["name"]:
                         (p["metadata"].get("labels") or {}).get(REVISION_LABEL, "")
                         for p in raw}
            if spec.upgradePolicy.strategy != "Manual" and not spec.upgrade.paused:
                offsets = await self.offsets(ref, spec, status, pods)
        step = plan_upgrade(spec, ref.name, revision, pods, revisions, status, time.time(),
                            offsets, resume)
        now = self.clock()
        events = list(step.events)
        failed = None
        if step.switchover_to:
            broker_id, why_not = switchover_target(step.switchover_to, status)
            if broker_id is not None:
                try:
                    await probe.switchover(spec.clusterName, spec.broker_name(ref.name),
                                           broker_id)
                except Exception as exc:
                    why_not = f"controller refused: {exc}"
            if why_not:
                failed = f"upgrade: switchover to {step.switchover_to} failed: {why_not}"
        if step.transfer_to:
            master = str(status.get("masterPod"))
            try:
                await self.upgrades.transfer_leadership(
                    broker_addr(ref.name, ref.namespace, spec, master),
                    f"n{int(step.transfer_to.rsplit('-', 1)[1])}")
            except Exception as exc:
                failed = f"upgrade: leadership transfer to {step.transfer_to} failed: {exc}"
            else:
                # no pod changes readiness in a handover: read the new leader quickly
                if self.sub is not None:
                    self.sub.poller.hurry()
        if failed is not None:
            # not recorded as asked: the next round asks again (one Event per distinct error)
            if failed != self._handover_failed:
                self.log.info("%s/%s: %s", ref.namespace, ref.name, failed)
                await self.api.post_event(build_event(body, "Warning", REASON_UPGRADE, failed,
                                                      now))
            self._handover_failed = failed
            step = UpgradeStep(condition=(True, "Waiting", failed))
            events = []
        else:
            self._handover_failed = None
        if step.delete:
            await self.api.delete(Ref("v1", "Pod", ref.namespace, step.delete))
        patch: dict[str, Any] = {}
        if step.status is not None and differs(step.status, recorded):
            patch["upgrade"] = merge_patch(recorded, step.status) if step.status else None
        await self.write_with_condition(ref, status, patch, "Upgrading", step.condition)
        if step.status is not None:
            self._upgrade = dict(step.status)
        if step.clear_resume:
            await self.api.patch(
                ref, {"metadata": {"annotations": {names.ANNOTATION_UPGRADE: None}}})
        for kind, message in events:
            self.log.info("%s/%s: %s", ref.namespace, ref.name, message)
            await self.api.post_event(build_event(body, kind, REASON_UPGRADE, message, now))

    async def offsets(
        self, ref: Ref, spec: BrokerGroupSpec, status: Mapping[str, Any], pods: list[PodInfo],
    ) -> dict[str, int]:
        """Commitlog max offset per pod. The master is asked first: a slave read after it
        is not behind by the writes that happened in between."""
        master = status.get("masterPod")
        order = sorted(pods, key=lambda p: (p.name != master, p.name))
        addrs = {broker_addr(ref.name, ref.namespace, spec, p.name): p.name for p in order}
        answers = await self.upgrades.max_offsets(list(addrs))
        return {addrs[a]: offset for a, offset in answers.items()}

    async def runtime_config(
        self, body: Mapping[str, Any], ref: Ref, spec: BrokerGroupSpec,
        status: Mapping[str, Any],
    ) -> None:
        """Push changed runtime keys to the running brokers (the pod template's hash leaves
        them out, so no pod restarts for them; a pod started later reads the ConfigMap)."""
        desired = runtime_config(spec)
        # as with status.upgrade: the only writer remembers better than a lagging index
        applied = self._runtime if self._runtime is not None \
            else status.get("appliedRuntimeConfig")
        changes = runtime_changes(desired, applied)
        if changes is None:
            return
        if changes:
            brokers = [broker_addr(ref.name, ref.namespace, spec, i)
                       for i in range(spec.replicas)]
            errors = await self.upgrades.update_config(brokers, changes)
            if errors:
                if errors != self._config_errors:
                    message = f"applying {sorted(changes)} without a restart failed:" \
                              f" {'; '.join(errors)}"
                    await self.api.post_event(build_event(body, "Warning", REASON_CONFIG,
                                                          message, self.clock()))
                self._config_errors = errors
                return
            listed = ", ".join(f"{k}={v}" for k, v in sorted(changes.items()))
            await self.api.post_event(build_event(
                body, "Normal", REASON_CONFIG, f"applied {listed} to every broker without a"
                                               f" restart", self.clock()))
        self._config_errors = []
        await self.api.write_status(ref, {"appliedRuntimeConfig": merge_patch(
            applied or {}, desired)}, conditions.FOLLOWER)
        self._runtime = dict(desired)


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch from ``old`` to ``new`` (keys gone become None)."""
    out: dict[str, Any] = {k: None for k in old if k not in new}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            out[key] = merge_patch(before, value)
        else:
            out[key] = value
    return out


def broker_addr(name: str, namespace: str, spec: BrokerGroupSpec, pod: str | int) -> str:
    """The remoting address of a BrokerGroup's pod (by name or ordinal)."""
    ordinal = pod if isinstance(pod, int) else int(pod.rsplit("-", 1)[1])
    return f"{names.pod_dns(name, ordinal, namespace)}:{spec.ports.listen}"


def running_mode(body: Mapping[str, Any], spec: BrokerGroupSpec) -> str:
    return str((body.get("status") or {}).get("appliedMode") or spec.mode)


class ControllerFollower:
    """Active controller, Raft term and members of a Controller, into its status."""

    def __init__(
        self, api: Api, factory: ProbeFactory, clock: Clock, logger: logging.Logger | Any,
        reads: Reads | None = None,
    ) -> None:
        self.api = api
        self.reads: Reads = reads or api
        self.probes = ProbeCache(factory)
        self.clock = clock
        self.log = logger

    async def close(self) -> None:
        await self.probes.close()

    async def step(self, live: Mapping[str, Any]) -> None:
        with metrics.follow_timer("Controller"):
            await self._step(live)

    async def _step(self, live: Mapping[str, Any]) -> None:
        body = await self.reads.get(Ref.of(live))
        if body is None or paused(body):
            return
        spec, _ = parse(ControllerSpec, body.get("spec"))
        if spec is None:
            return
        meta = body["metadata"]
        ref = Ref(names.API_VERSION, "Controller", meta["namespace"], meta["name"])
        view = controller_view(meta["name"], meta["namespace"], spec)
        probe = await self.probes.get(ProbeTarget(controller_addrs=view.controller_addr))
        status = body.get("status") or {}
        now = self.clock()
        pods = [PodInfo(names.pod(meta["name"], i)) for i in range(spec.replicas)]
        try:
            info = await probe.metadata()
        except ProbeError as exc:
            metrics.PROBE_FAILURES.labels(ref.namespace, ref.name).inc()
            conds = conditions.set_condition(
                status.get("conditions", []), "LeaderElected", None, "ProbeFailed", str(exc), now
            )
            if differs(conds, status.get("conditions")):
                await self.api.write_status(ref, {"conditions": conds}, conditions.FOLLOWER)
            return
        active = pod_for_address(info.active, pods)
        elected = ("ActiveController", f"active controller is {active}") if active else (
            "NoActiveController", "no controller is active")
        patch = {
            "activeController": active,
            "raftTerm": info.term,
            "members": [pod_for_address(m, pods) or m for m in info.members],
            "conditions": conditions.set_condition(
                status.get("conditions", []), "LeaderElected", active is not None,
                elected[0], elected[1], now,
            ),
        }
        if differs(patch, status):
            await self.api.write_status(ref, patch, conditions.FOLLOWER)
        if active and active != status.get("activeController"):
            message = f"active controller changed from {status.get('activeController') or 'none'}" \
                      f" to {active} (term {info.term})"
            await self.api.post_event(
                build_event(body, "Normal", "ActiveControllerChanged", message, now)
            )
