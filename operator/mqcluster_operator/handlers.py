"""kopf handlers: thin wrappers around the pure planners and the daemons' steps.

``kopf run -m mqcluster_operator.handlers`` registers them in kopf's default
registry; tests call ``register(registry)`` with their own registry and memo.
Memo keys (all optional, filled with defaults at login/startup): ``api``
(k8s.Api), ``probe_factory``, ``clock`` (returns RFC 3339 now),
``follow_interval`` and ``reconcile_interval`` (seconds), ``poll_interval`` (seconds
between two polls of a controller cluster, shared by all its BrokerGroups) and
``hub`` (the ElectionHub doing those polls), ``reconciling`` (a semaphore: at most
``MQCLUSTER_RECONCILE_CONCURRENCY`` reconciliations at once, so that the resync
timers of many resources, which fire together, do not flood the API server and
delay the election followers' relabels), ``readiness`` (readiness.Refresher: Ready
recomputed when pods or StatefulSets change), ``reconciled`` (the reconciler's
conditions as last written, by uid) and ``followers`` (the BrokerGroup followers by
namespace and name, woken by their pods' readiness changes).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import os
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

import kopf

from . import conditions, kopf_settings, metrics, names, readiness, reconcile, views
from .applied import AppliedCache
from .events import build_event
from .follow.controller import ControllerFollower
from .follow.daemon import BrokerGroupFollower
from .follow.election_poller import ElectionHub
from .follow.election_probes import default_probe
from .k8s import Api, ApiError, Ref, differs
from .views import IndexedReads, Reads
from .write_backoff import REASON_REFUSED, WriteBackoff

CONTROLLERS = (names.GROUP, names.VERSION, "controllers")
BROKERGROUPS = (names.GROUP, names.VERSION, "brokergroups")


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


def ensure_memo(memo: Any) -> None:
    memo.setdefault("api", Api())
    memo.setdefault("probe_factory", default_probe)
    memo.setdefault("clock", utc_now)
    memo.setdefault("follow_interval", env_float("MQCLUSTER_FOLLOW_INTERVAL_SECONDS", 2.0))
    memo.setdefault("reconcile_interval", env_float("MQCLUSTER_RECONCILE_INTERVAL_SECONDS", 30.0))
    memo.setdefault("poll_interval", env_float("MQCLUSTER_POLL_INTERVAL_SECONDS", 0.2))
    if memo.get("applied") is None:
        memo.applied = AppliedCache(env_float("MQCLUSTER_REAPPLY_SECONDS", 600.0))
    if memo.get("reconciling") is None:
        limit = int(env_float("MQCLUSTER_RECONCILE_CONCURRENCY", 4))
        memo.reconciling = asyncio.Semaphore(max(1, limit))
    if memo.get("reconciled") is None:
        memo.reconciled = {}
    if memo.get("followers") is None:
        memo.followers = {}
    if memo.get("readiness") is None:
        memo.readiness = readiness.Refresher(memo.api, memo.clock, memo.reconciled,
                                             lock=lambda body: reconciling(memo, body))
        memo.readiness_seen = readiness.Tracker()
    if memo.get("hub") is None:
        memo.hub = ElectionHub(
            memo.probe_factory, memo.poll_interval, health_interval=memo.follow_interval,
            max_backoff=env_float("MQCLUSTER_POLL_MAX_BACKOFF_SECONDS", 5.0),
        )


async def startup(settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
    kopf_settings.configure(settings)
    ensure_memo(memo)
    metrics.serve(int(os.environ.get("MQCLUSTER_METRICS_PORT", "0") or 0))


async def cleanup(memo: Any, **_: Any) -> None:
    refresher = memo.get("readiness")
    if refresher is not None:
        await refresher.close()
    hub = memo.get("hub")
    if hub is not None:
        await hub.close()
    api = memo.get("api")
    if api is not None:
        await api.close()


def login(memo: Any, **kwargs: Any) -> kopf.ConnectionInfo | None:
    ensure_memo(memo)
    connect = memo.get("connect")
    if connect is not None:
        info: kopf.ConnectionInfo | None = connect(**kwargs)
    else:
        info = kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)
    if info is not None:
        memo.api.configure(info)
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
    memo: Any, body: kopf.Body, outcome: reconcile.Outcome, patch: kopf.Patch, needs_master: bool,
    reads: Reads,
) -> None:
    api: Api = memo.api
    status = dict(outcome.status)
    refused = await apply_objects(api, outcome.objects, memo.get("applied"))
    if refused is not None:
        reason, message = refused
        base = status.get("conditions", body.status.get("conditions") or [])
        status["conditions"] = conditions.set_condition(
            base, "Applied", False, reason, message, memo.clock(), body.metadata.get("generation"))
        before = conditions.get_condition(body.status.get("conditions") or [], "Applied") or {}
        if (before.get("status"), before.get("reason")) != ("False", reason):
            outcome = dataclasses.replace(outcome, event=("Warning", "ApplyFailed", message))
    elif outcome.objects:
        base = status.get("conditions", body.status.get("conditions") or [])
        status["conditions"] = conditions.set_condition(
            base, "Applied", True, "Applied", "", memo.clock(), body.metadata.get("generation"))
    if outcome.statefulset:
        ns = body.metadata.namespace or ""
        sts = await reads.get(Ref("apps/v1", "StatefulSet", ns, outcome.statefulset))
        selector = (((sts or {}).get("spec") or {}).get("selector") or {}).get("matchLabels")
        pods = await reads.list(Ref("v1", "Pod", ns), selector) if selector else None
        view = {**dict(body), "status": {**dict(body.status), **status}}
        status.update(reconcile.readiness(view, sts, memo.clock(), needs_master, pods))
    current: Any = body.status
    own = status.pop("conditions", None)
    if own is not None:
        own = conditions.RECONCILER.own(own)
        if differs(own, conditions.RECONCILER.own(current.get("conditions") or [])):
            await api.write_status(Ref.of(body), {"conditions": own}, conditions.RECONCILER)
            # the readiness refresher starts from this, not from an index behind it
            memo.setdefault("reconciled", {})[body.metadata.uid] = own
    for key, value in status.items():
        if differs(value, current.get(key)):
            patch.status[key] = value
    if outcome.event:
        await api.post_event(build_event(body, *outcome.event, memo.clock()))


@contextlib.asynccontextmanager
async def reconciling(memo: Any, body: Mapping[str, Any]) -> AsyncIterator[None]:
    """One reconciliation of an object at a time (kopf runs a resync timer beside the
    create/update handlers of the same object), and at most ``memo.reconciling`` in all."""
    locks: dict[str, asyncio.Lock] = memo.setdefault("object_locks", {})
    meta = body["metadata"]
    key = str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")
    lock = locks.setdefault(key, asyncio.Lock())
    async with lock, memo.reconciling:
        yield


async def reconcile_controller(
    body: kopf.Body, memo: Any, patch: kopf.Patch, **kwargs: Any
) -> None:
    async with reconciling(memo, body):
        with metrics.reconcile_timer("Controller"):
            outcome = reconcile.plan_controller(body, memo.clock())
            await apply_outcome(memo, body, outcome, patch, needs_master=False,
                                reads=IndexedReads(kwargs))


async def reconcile_brokergroup(
    body: kopf.Body, memo: Any, patch: kopf.Patch, **kwargs: Any
) -> None:
    async with reconciling(memo, body):
        with metrics.reconcile_timer("BrokerGroup"):
            ref = reconcile.controller_ref(body)
            controller = None
            if ref is not None:
                controller = await IndexedReads(kwargs).get(
                    Ref(names.API_VERSION, "Controller", ref[0], ref[1])
                )
            outcome = reconcile.plan_brokergroup(body, controller, memo.clock())
            await apply_outcome(memo, body, outcome, patch, needs_master=True,
                                reads=IndexedReads(kwargs))


async def follow_brokergroup(
    body: kopf.Body, memo: Any, stopped: kopf.DaemonStopped, logger: Any, **kwargs: Any
) -> None:
    follower = BrokerGroupFollower(memo.api, memo.hub, memo.clock, logger, IndexedReads(kwargs),
                                   memo.get("migration_driver"), memo.get("upgrade_driver"))
    # the pods' watch (readiness.py) wakes the follower when a pod's readiness changes
    key = (body.metadata.namespace or "", body.metadata.name or "")
    followers: dict[tuple[str, str], BrokerGroupFollower] = memo.setdefault("followers", {})
    followers[key] = follower
    try:
        await run_follower(follower, body, memo.api, memo.clock, stopped, memo.follow_interval,
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
    body: kopf.Body, memo: Any, stopped: kopf.DaemonStopped, logger: Any, **kwargs: Any
) -> None:
    follower = ControllerFollower(memo.api, memo.probe_factory, memo.clock, logger,
                                  IndexedReads(kwargs))
    try:
        while not stopped:
            try:
                await follower.step(body)
            except Exception as exc:
                logger.warning("controller following failed: %s", exc)
            await stopped.wait(memo.follow_interval)
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
