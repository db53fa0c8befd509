"""Ready follows the pods: recomputed when a pod's or the StatefulSet's readiness, or the
resource's master, changes, not only by the create/update handlers and the resync.

kopf's watches on the operator's Pods and StatefulSets (the ones that keep the indices,
``views.py``) call ``on_pod`` and ``on_statefulset``; the custom resources' own watch
calls ``on_owner``. Each notes what readiness depends on and, when it changed, pokes the
owning resource: a ``Refresher`` coalesces the pokes of one resource (the three pods of a
group starting together make one write) and writes Ready, Progressing, phase and
readyReplicas when they differ. A change in a broker pod's readiness also wakes the
group's election follower (``OperatorState.followers``), which then polls the brokers quickly:
a killed master's pod turning NotReady is the moment a DLedger or master-slave group's
election changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any

import kopf

from . import conditions, names, reconcile
from .k8s import Api, Ref, differs
from .views import IndexedReads, Reads

if TYPE_CHECKING:
    from .state import OperatorState

log = logging.getLogger(__name__)

Key = tuple[str, str, str]
"""(kind, namespace, name) of a BrokerGroup or Controller."""
KINDS = {"broker": "BrokerGroup", "controller": "Controller"}
COALESCE_SECONDS = 0.02
"""A poke waits this long for the others of the same change (pods of one group)."""


class Coalescer:
    """Runs ``action(key)`` once per burst of ``poke(key)``; a poke that arrives while the
    action runs makes it run once more after (it may have read what changed too early)."""

    def __init__(self, action: Callable[[Any], Awaitable[None]],
                 delay: float = COALESCE_SECONDS) -> None:
        self._action = action
        self._delay = delay
        self._tasks: dict[Hashable, asyncio.Task[None]] = {}
        self._again: set[Hashable] = set()

    def poke(self, key: Hashable) -> None:
        if key in self._tasks:
            self._again.add(key)
        else:
            self._tasks[key] = asyncio.create_task(self._run(key), name=f"refresh {key}")

    async def _run(self, key: Hashable) -> None:
        try:
            while True:
                await asyncio.sleep(self._delay)
                self._again.discard(key)
                try:
                    await self._action(key)
                except Exception as exc:  # the resync still corrects it
                    log.warning("refreshing %s failed: %s", key, exc)
                if key not in self._again:
                    return
        finally:
            del self._tasks[key]

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


class Refresher:
    """Writes a resource's readiness from the indices (``reads``) when it differs."""

    def __init__(self, api: Api, clock: Callable[[], str], memory: dict[Any, Any],
                 lock: Callable[[Mapping[str, Any]], Any] | None = None) -> None:
        self.api = api
        self.clock = clock
        self.reads: Reads | None = None
        self.memory = memory
        """The reconciler's conditions as last written, by resource uid (handlers.py)."""
        self.lock = lock
        self.writes = 0
        self._coalescer = Coalescer(self.refresh)

    def poke(self, key: Key, reads: Reads) -> None:
        self.reads = reads
        self._coalescer.poke(key)

    async def close(self) -> None:
        await self._coalescer.close()

    async def refresh(self, key: Key) -> None:
        """Under the resource's reconciliation lock (``lock``): one writer at a time."""
        kind, namespace, name = key
        reads = self.reads
        assert reads is not None
        ref = Ref(names.API_VERSION, kind, namespace, name)
        body = await reads.get(ref)
        if body is None or self.lock is None:
            await self._refresh(ref, reads)
            return
        async with self.lock(body):
            await self._refresh(ref, reads)

    async def _refresh(self, ref: Ref, reads: Reads) -> None:
        kind, namespace, name = ref.kind, ref.namespace, ref.name
        body = await reads.get(ref)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return
        status = dict(body.get("status") or {})
        uid = body["metadata"].get("uid")
        remembered = self.memory.get(uid)
        if remembered is not None:  # newer than an index that has not seen the write yet
            status["conditions"] = conditions.RECONCILER.own(remembered) + [
                c for c in status.get("conditions") or []
                if not conditions.RECONCILER.owns(str(c.get("type")))]
        ready = conditions.get_condition(status.get("conditions") or [], "Ready")
        if ready is not None and ready.get("reason") not in reconcile.READINESS_REASONS:
            return  # an invalid spec, a pause, a missing Controller: the planner's word
        sts = await reads.get(Ref("apps/v1", "StatefulSet", namespace, name))
        if sts is None:
            return  # not applied yet: the create handler computes it
        selector = ((sts.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        pods = await reads.list(Ref("v1", "Pod", namespace), selector) if selector else None
        view = {**body, "status": status}
        computed = reconcile.readiness(view, sts, self.clock(), kind == "BrokerGroup", pods)
        own = conditions.RECONCILER.own(computed.pop("conditions"))
        # phase and readyReplicas first: whoever sees the new Ready sees them too
        rest = {k: v for k, v in computed.items() if v != status.get(k)}
        if rest:
            await self.api.patch(ref, {"status": rest}, "status")
            self.writes += 1
        if differs(own, conditions.RECONCILER.own(status.get("conditions") or [])):
            await self.api.write_status(ref, {"conditions": own}, conditions.RECONCILER)
            self.memory[uid] = own
            self.writes += 1


def pod_signature(body: Mapping[str, Any], event_type: str | None) -> tuple[Any, ...]:
    """What a pod contributes to readiness and to the election's reading."""
    if event_type == "DELETED":
        return ("gone",)
    return (reconcile.pod_ready(body), (body.get("status") or {}).get("podIP"),
            (body.get("metadata") or {}).get("uid"))


def statefulset_signature(body: Mapping[str, Any], event_type: str | None) -> tuple[Any, ...]:
    if event_type == "DELETED":
        return ("gone",)
    status = body.get("status") or {}
    return (status.get("readyReplicas"), status.get("replicas"),
            status.get("updateRevision"), (body.get("spec") or {}).get("replicas"))


def owner_signature(body: Mapping[str, Any], event_type: str | None) -> tuple[Any, ...]:
    """A custom resource's own fields that readiness reads (its master, its size, a roll)."""
    if event_type == "DELETED":
        return ("gone",)
    status = body.get("status") or {}
    upgrading = conditions.get_condition(status.get("conditions") or [], "Upgrading") or {}
    ready = conditions.get_condition(status.get("conditions") or [], "Ready") or {}
    return (status.get("masterPod"), (body.get("spec") or {}).get("replicas"),
            upgrading.get("status"), ready.get("status"), ready.get("reason"),
            status.get("phase"), status.get("readyReplicas"))


class Tracker:
    """The last signature seen per object: only a change pokes."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str, str], tuple[Any, ...]] = {}

    def changed(self, kind: str, body: Mapping[str, Any], signature: tuple[Any, ...]) -> bool:
        meta = body.get("metadata") or {}
        key = (kind, str(meta.get("namespace", "")), str(meta.get("name", "")))
        if signature == ("gone",):
            return self._seen.pop(key, None) is not None
        if self._seen.get(key) == signature:
            return False
        self._seen[key] = signature
        return True


def owner_of(body: Mapping[str, Any]) -> Key | None:
    """The BrokerGroup or Controller a Pod or StatefulSet of the operator belongs to."""
    meta = body.get("metadata") or {}
    labels = meta.get("labels") or {}
    kind = KINDS.get(str(labels.get(names.LABEL_COMPONENT, "")))
    instance = labels.get(names.LABEL_INSTANCE)
    if kind is None or not instance or labels.get(names.LABEL_MANAGED_BY) not in (
            None, names.MANAGER):
        return None
    return kind, str(meta.get("namespace", "")), str(instance)


def _state(memo: Mapping[str, Any]) -> OperatorState | None:
    """The handlers' state (``state.py``), once startup built it."""
    from .state import OperatorState  # here: state.py imports this module

    state = memo.get("state")
    return state if isinstance(state, OperatorState) else None


async def on_pod(body: kopf.Body, type: str | None, memo: kopf.Memo, **kwargs: Any) -> None:
    state = _state(memo)
    owner = owner_of(body)
    if state is None or owner is None:
        return
    refresher, tracker = state.readiness, state.readiness_seen
    if not tracker.changed("Pod", body, pod_signature(body, type)):
        return
    refresher.poke(owner, IndexedReads(kwargs))
    follower = state.followers.get(owner[1:])
    if owner[0] == "BrokerGroup" and follower is not None:
        follower.poke()


async def on_statefulset(body: kopf.Body, type: str | None, memo: kopf.Memo,
                         **kwargs: Any) -> None:
    state = _state(memo)
    owner = owner_of(body)
    if state is None or owner is None:
        return
    refresher, tracker = state.readiness, state.readiness_seen
    if tracker.changed("StatefulSet", body, statefulset_signature(body, type)):
        refresher.poke(owner, IndexedReads(kwargs))


def on_owner(kind: str) -> Callable[..., Awaitable[None]]:
    async def handler(body: kopf.Body, type: str | None, memo: kopf.Memo,
                      **kwargs: Any) -> None:
        state = _state(memo)
        if state is None:
            return
        refresher, tracker = state.readiness, state.readiness_seen
        if type == "DELETED":
            refresher.memory.pop((body.get("metadata") or {}).get("uid"), None)
        if tracker.changed(kind, body, owner_signature(body, type)) and type != "DELETED":
            meta = body.get("metadata") or {}
            refresher.poke((kind, str(meta.get("namespace", "")), str(meta.get("name", ""))),
                           IndexedReads(kwargs))
    handler.__name__ = f"on_{kind.lower()}"
    return handler


def register(registry: kopf.OperatorRegistry) -> None:
    present = {names.LABEL_INSTANCE: kopf.PRESENT}
    kopf.on.event("", "v1", "pods", registry=registry, labels=present,
                  id="readiness")(on_pod)
    kopf.on.event("apps", "v1", "statefulsets", registry=registry, labels=present,
                  id="readiness")(on_statefulset)
    kopf.on.event(names.GROUP, names.VERSION, "brokergroups", registry=registry,
                  id="readiness")(on_owner("BrokerGroup"))
    kopf.on.event(names.GROUP, names.VERSION, "controllers", registry=registry,
                  id="readiness")(on_owner("Controller"))
