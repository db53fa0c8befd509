"""The BrokerGroup daemon's round: it reads the group, its pods and its election once,
then runs the steps of each concern in order (``following``, ``migration``, ``epochs``,
``scaling``, ``switchover``, ``runtime_config``, ``restart``, ``upgrade``); each step
starts from what the steps before it wrote."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from typing import Any, Protocol

from mqcluster.protocol.election import Election

from .. import conditions, metrics, names
from ..k8s import Api, Ref, differs
from ..manifests import Owner
from ..manifests.meta import selector_labels
from ..models import BrokerGroupSpec
from ..reconcile import controller_ref, parse, paused, view_of
from ..views import Reads
from .context import Clock, Context, Log, Round, broker_addr, running_mode
from .election_plan import PodInfo, ProbeError
from .election_poller import ElectionHub, Subscription
from .election_probes import ProbeTarget
from .epochs import check_epochs
from .epochs_driver import EpochsDriver
from .following import follow, relabel
from .memo import FollowerMemo
from .migration import migrate
from .migration_driver import AdminDriver, MigrationDriver
from .restart import restart
from .runtime_config import runtime_config
from .runtime_config_driver import RuntimeConfigDriver
from .scaling import scale
from .scaling_driver import ScalingDriver
from .switchover import switchover
from .upgrade import upgrade
from .upgrade_driver import AdminUpgradeDriver, UpgradeDriver
from .upgrade_plan import REVISION_LABEL

TARGET_TTL = 30.0


class BrokerDriver(MigrationDriver, EpochsDriver, ScalingDriver, Protocol):
    """The mqadmin calls of a migration, the epoch checks and a scale-down (one object:
    ``migration_driver.AdminDriver``)."""


class BrokerUpgradeDriver(UpgradeDriver, RuntimeConfigDriver, Protocol):
    """The mqadmin calls of an upgrade and of runtime config (one object:
    ``upgrade_driver.AdminUpgradeDriver``)."""


class BrokerGroupFollower:
    """The steps of one BrokerGroup's daemon; elections come from the shared ElectionHub.

    ``step`` runs every ``follow_interval`` and whenever the poll of the group's
    controllers reports a change (``wait``). A change-triggered step first
    relabels the pods (``relabel``: one list, the patches), then does the rest.
    The probe target (which reads the Controller) is looked up again when the
    group's spec changes and at least every ``TARGET_TTL`` seconds.
    """

    def __init__(
        self, api: Api, hub: ElectionHub, clock: Clock, logger: Log,
        reads: Reads | None = None, driver: BrokerDriver | None = None,
        upgrades: BrokerUpgradeDriver | None = None,
    ) -> None:
        self.api = api
        self.reads: Reads = reads or api
        self.driver: BrokerDriver = driver or AdminDriver()
        self.upgrades: BrokerUpgradeDriver = upgrades or AdminUpgradeDriver()
        self.memo = FollowerMemo()
        self.ctx = Context(api, self.reads, clock, logger, self.memo.status)
        self.hub = hub
        self.clock = clock
        self.sub: Subscription | None = None
        self._poked = asyncio.Event()
        self._key: tuple[ProbeTarget, str] | None = None
        self._selector: dict[str, str] | None = None
        self._target_at = float("-inf")
        self._generation: tuple[int | None, str] | None = None

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

    async def step(self, live: Mapping[str, Any], changed: bool = False) -> None:
        with metrics.follow_timer("BrokerGroup"):
            await self._step(live, changed)

    async def _step(self, live: Mapping[str, Any], changed: bool = False) -> None:
        """One round: the steps in order, each starting from what the steps before it
        wrote (``remembered``)."""
        ctx, memo = self.ctx, self.memo
        if changed:
            await relabel(ctx, self.sub, self._selector, live)
        found = await self.read_round(live, changed)
        if found is None:
            return
        rnd, status, latest = found
        if isinstance(latest, ProbeError):
            # A migration stops every pod on purpose: no broker answers then, and the
            # migration must still see them gone to go on.
            await migrate(ctx, self.driver, rnd, status, Election(None))
            return
        status = await follow(ctx, memo.following, rnd, status, latest, memo.epochs.read)
        if rnd.sub.changed.is_set():
            return  # a newer election waits: follow it first, the rest in the next round
        if await migrate(ctx, self.driver, rnd, status, latest):
            return
        await check_epochs(ctx, memo.epochs, self.driver, rnd, ctx.remembered(status))
        if await scale(ctx, self.driver, rnd, ctx.remembered(status), memo.epochs.read):
            return
        await switchover(ctx, rnd, ctx.remembered(status))
        await runtime_config(ctx, memo.runtime_config, self.upgrades, rnd,
                             ctx.remembered(status))
        if await restart(ctx, rnd, ctx.remembered(status)):
            return
        await upgrade(ctx, memo.upgrade, self.upgrades, rnd, ctx.remembered(status))

    async def read_round(
        self, live: Mapping[str, Any], changed: bool,
    ) -> tuple[Round, dict[str, Any], Election | ProbeError] | None:
        """The group, its status (with what this follower wrote), its election and pods;
        None when there is nothing to follow. Reads the resource from ``reads`` (kopf's
        live body lags behind long handlers; the indices follow the watch). A failed
        poll is reported here (MasterElected Unknown); the round goes on with it only
        while a migration is under way."""
        ctx, memo = self.ctx, self.memo
        body = await self.reads.get(Ref.of(live))
        if body is None or paused(body):
            await self.close()
            return None
        spec, _ = parse(BrokerGroupSpec, body.get("spec"))
        if spec is None:
            await self.close()
            return None
        meta = body["metadata"]
        ns, name = meta["namespace"], meta["name"]
        ref = Ref(names.API_VERSION, "BrokerGroup", ns, name)
        status = dict(body.get("status") or {})
        status.update({k: v for k, v in memo.following.wrote.items() if k != "conditions"})
        status = ctx.remembered(status)
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
            return None
        sub = await self.subscribe(target, broker_name)
        latest = sub.latest
        if latest is None:
            return None
        now = self.clock()
        if isinstance(latest, ProbeError):
            metrics.PROBE_FAILURES.labels(ns, name).inc()
            conds = conditions.set_condition(
                status.get("conditions", []), "MasterElected", None, "ProbeFailed", str(latest),
                now,
            )
            if differs(conds, status.get("conditions")):
                await ctx.write_status(ref, {"conditions": conds})
            if not (status.get("migration") or {}).get("step"):
                return None
        self._selector = selector_labels(Owner.from_body(body), "broker")
        raw_pods = await self.reads.list(Ref("v1", "Pod", ns), self._selector)
        revisions = {
            p["metadata"]["name"]: (p["metadata"].get("labels") or {}).get(REVISION_LABEL, "")
            for p in raw_pods
        }
        pods = [PodInfo.of(p) for p in raw_pods]
        rnd = Round(body, ref, spec, pods, revisions, sub, target, self._selector, now)
        return rnd, status, latest
