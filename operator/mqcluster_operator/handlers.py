"""kopf handlers: thin wrappers around the pure planners and the daemons' steps.

``kopf run -m mqcluster_operator.handlers`` registers them in kopf's default
registry; tests call ``register(registry)`` with their own registry and memo.
What the handlers share is one typed ``state.OperatorState`` in kopf's memo, built
at login/startup from the memo's optional entries (see ``state.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
from collections.abc import AsyncIterator, Iterable, Mapping, MutableMapping
from typing import Any

import kopf

from . import conditions, kopf_settings, metrics, names, readiness, reconcile, views
from .applied import AppliedCache
from .events import build_event
from .follow.controller import ControllerFollower
from .follow.daemon import BrokerGroupFollower
from .k8s import Api, ApiError, Ref, differs
from .state import OperatorState, ensure_state, env_float
from .views import IndexedReads, Reads
from .write_backoff import REASON_REFUSED, WriteBackoff

CONTROLLERS = (names.GROUP, names.VERSION, "controllers")
BROKERGROUPS = (names.GROUP, names.VERSION, "brokergroups")


def operator_state(memo: MutableMapping[str, Any]) -> OperatorState:
    """The handlers' shared state in kopf's ``memo`` (built on first use)."""
    return ensure_state(memo, reconciling)


async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    kopf_settings.configure(settings)
    operator_state(memo)
    metrics.serve(int(os.environ.get("MQCLUSTER_METRICS_PORT", "0") or 0))


async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    state = memo.get("state")
    if isinstance(state, OperatorState):
        await state.readiness.close()
        await state.hub.close()
        await state.api.close()


def login(memo: kopf.Memo, **kwargs: Any) -> kopf.ConnectionInfo | None:
    state = operator_state(memo)
    if state.connect is not None:
        info = state.connect(**kwargs)
    else:
        info = kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)
    if info is not None:
        state.api.configure(info)
    return info


def refusal(obj: Mapping[str, Any], exc: ApiError) -> tuple[str, str]:
    """(reason, message) of a write the API server refuses for good."""
    what = f"{obj['kind']} {obj['metadata'].get('name', '')}"
    # The real API server says which fields may change ("updates to statefulset spec for
    # fields other than ... are forbidden"), not which one did; of what the operator
    # renders into a StatefulSet, only the claim templates (spec.storage) can be refused.
    if obj["kind"] == "StatefulSet" and exc.status == 422 and (
            "volumeClaimTemplates" in str(exc)
            or "updates to statefulset spec for fields other than" in str(exc)):
        return ("StorageImmutable",
                f"{what}: storage (size, storageClassName) cannot change once the "
                f"StatefulSet exists; revert spec.storage or migrate the data to a new "
                f"BrokerGroup ({exc.message})")
    return "ApplyRefused", f"{what}: the API server refused the change: {exc}"


async def apply_objects(
    api: Api, objects: Iterable[Mapping[str, Any]], cache: AppliedCache | None = None,
) -> tuple[str, str] | None:
    """Apply every object (unless ``cache`` says it was just applied as it is); a transient
    failure is retried by kopf after the server's ``Retry-After``; a permanent one is
    returned as (reason, message), not retried."""
    for obj in objects:
        if cache is not None and cache.fresh(obj):
            continue
        try:
            result = await api.apply(dict(obj))
        except ApiError as exc:
            if cache is not None:
                cache.forget(obj)
            if exc.transient:
                raise kopf.TemporaryError(str(exc), delay=exc.retry_after or 1.0) from exc
            metrics.APPLIED.labels(obj["kind"], "refused").inc()
            return refusal(obj, exc)
        if cache is not None:
            cache.remember(obj)
        metrics.APPLIED.labels(obj["kind"], result).inc()
    return None


async def apply_outcome(
    state: OperatorState, body: kopf.Body, outcome: reconcile.Outcome, patch: kopf.Patch,
    needs_master: bool, reads: Reads,
) -> None:
    api = state.api
    status = dict(outcome.status)
    refused = await apply_objects(api, outcome.objects, state.applied)
    if refused is not None:
        reason, message = refused
        base = status.get("conditions", body.status.get("conditions") or [])
        status["conditions"] = conditions.set_condition(
            base, "Applied", False, reason, message, state.clock(), body.metadata.get("generation"))
        before = conditions.get_condition(body.status.get("conditions") or [], "Applied") or {}
        if (before.get("status"), before.get("reason")) != ("False", reason):
            outcome = dataclasses.replace(outcome, event=("Warning", "ApplyFailed", message))
    elif outcome.objects:
        base = status.get("conditions", body.status.get("conditions") or [])
        status["conditions"] = conditions.set_condition(
            base, "Applied", True, "Applied", "", state.clock(), body.metadata.get("generation"))
    if outcome.statefulset:
        ns = body.metadata.namespace or ""
        sts = await reads.get(Ref("apps/v1", "StatefulSet", ns, outcome.statefulset))
        selector = (((sts or {}).get("spec") or {}).get("selector") or {}).get("matchLabels")
        pods = await reads.list(Ref("v1", "Pod", ns), selector) if selector else None
        view = {**dict(body), "status": {**dict(body.status), **status}}
        status.update(reconcile.readiness(view, sts, state.clock(), needs_master, pods))
    current: Any = body.status
    own = status.pop("conditions", None)
    if own is not None:
        own = conditions.RECONCILER.own(own)
        if differs(own, conditions.RECONCILER.own(current.get("conditions") or [])):
            await api.write_status(Ref.of(body), {"conditions": own}, conditions.RECONCILER)
            # the readiness refresher starts from this, not from an index behind it
            state.reconciled[body.metadata.uid] = own
    for key, value in status.items():
        if differs(value, current.get(key)):
            patch.status[key] = value
    if outcome.event:
        await api.post_event(build_event(body, *outcome.event, state.clock()))


@contextlib.asynccontextmanager
async def reconciling(state: OperatorState, body: Mapping[str, Any]) -> AsyncIterator[None]:
    """One reconciliation of an object at a time (kopf runs a resync timer beside the
    create/update handlers of the same object), and at most ``state.reconciling`` in all."""
    locks = state.object_locks
    meta = body["metadata"]
    key = str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")
    lock = locks.setdefault(key, asyncio.Lock())
    async with lock, state.reconciling:
        yield


async def reconcile_controller(
    body: kopf.Body, memo: kopf.Memo, patch: kopf.Patch, **kwargs: Any
) -> None:
    state = operator_state(memo)
    async with reconciling(state, body):
        with metrics.reconcile_timer("Controller"):
            outcome = reconcile.plan_controller(body, state.clock())
            await apply_outcome(state, body, outcome, patch, needs_master=False,
                                reads=IndexedReads(kwargs))


async def reconcile_brokergroup(
    body: kopf.Body, memo: kopf.Memo, patch: kopf.Patch, **kwargs: Any
) -> None:
    state = operator_state(memo)
    async with reconciling(state, body):
        with metrics.reconcile_timer("BrokerGroup"):
            ref = reconcile.controller_ref(body)
            controller = None
            if ref is not None:
                controller = await IndexedReads(kwargs).get(
                    Ref(names.API_VERSION, "Controller", ref[0], ref[1])
                )
            outcome = reconcile.plan_brokergroup(body, controller, state.clock())
            await apply_outcome(state, body, outcome, patch, needs_master=True,
                                reads=IndexedReads(kwargs))


async def follow_brokergroup(
    body: kopf.Body, memo: kopf.Memo, stopped: kopf.DaemonStopped, logger: Any, **kwargs: Any
) -> None:
    state = operator_state(memo)
    follower = BrokerGroupFollower(state.api, state.hub, state.clock, logger,
                                   IndexedReads(kwargs), state.migration_driver,
                                   state.upgrade_driver)
    # the pods' watch (readiness.py) wakes the follower when a pod's readiness changes
    key = (body.metadata.namespace or "", body.metadata.name or "")
    followers = state.followers
    followers[key] = follower
    try:
        await run_follower(follower, body, state.api, state.clock, stopped, state.follow_interval,
                           WriteBackoff(), logger)
    finally:
        if followers.get(key) is follower:
            del followers[key]
        await follower.close()


async def run_follower(follower: Any, body: Mapping[str, Any], api: Any, clock: Any,
                       stopped: Any, interval: float, backoff: WriteBackoff,
                       logger: Any) -> None:
    """Step the follower until the daemon stops; after a failed round wait what
    ``backoff`` says (an election change still wakes it: it is on the failover path)."""
    changed = False
    while not stopped:
        wait = interval
        try:
            await follower.step(body, changed)
            backoff.succeeded()
        except Exception as exc:
            wait = max(interval, backoff.delay(exc))
            logger.warning("election following failed (next round in %.1f s): %s", wait, exc)
            message = backoff.report(exc)
            if message is not None:
                with contextlib.suppress(Exception):
                    await api.post_event(build_event(body, "Warning", REASON_REFUSED,
                                                     f"a write was refused: {message}",
                                                     clock()))
        changed = await follower.wait(stopped, wait)


async def follow_controller(
    body: kopf.Body, memo: kopf.Memo, stopped: kopf.DaemonStopped, logger: Any, **kwargs: Any
) -> None:
    state = operator_state(memo)
    follower = ControllerFollower(state.api, state.probe_factory, state.clock, logger,
                                  IndexedReads(kwargs))
    try:
        while not stopped:
            try:
                await follower.step(body)
            except Exception as exc:
                logger.warning("controller following failed: %s", exc)
            await stopped.wait(state.follow_interval)
    finally:
        await follower.close()


def register(
    registry: kopf.OperatorRegistry, reconcile_interval: float | None = None, backoff: float = 10.0
) -> None:
    """Register every handler; failed handlers are retried after ``backoff`` seconds."""
    interval = reconcile_interval or env_float("MQCLUSTER_RECONCILE_INTERVAL_SECONDS", 30.0)
    kopf.on.startup(registry=registry)(startup)
    kopf.on.cleanup(registry=registry)(cleanup)
    kopf.on.login(registry=registry)(login)
    views.register(registry)
    readiness.register(registry)
    for resource, fn, follow in (
        (CONTROLLERS, reconcile_controller, follow_controller),
        (BROKERGROUPS, reconcile_brokergroup, follow_brokergroup),
    ):
        kopf.on.resume(*resource, registry=registry, id="resume", backoff=backoff)(fn)
        kopf.on.create(*resource, registry=registry, id="create", backoff=backoff)(fn)
        kopf.on.update(*resource, registry=registry, id="update", backoff=backoff)(fn)
        kopf.timer(*resource, registry=registry, id="resync", interval=interval,
                   initial_delay=interval, backoff=backoff)(fn)
        kopf.daemon(*resource, registry=registry, id="follow", cancellation_timeout=5.0)(follow)


register(kopf.get_default_registry())
