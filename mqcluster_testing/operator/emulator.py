"""kmock's KubernetesEmulator with the behaviours the operator relies on.

Added: a bounded request history (kmock keeps every request and matches
each new one against all of them), uid / creationTimestamp / resourceVersion /
generation on objects, 422 on failed JSON-patch tests, the status subresource
(status only through ``/status``, spec never), generation bumps on spec changes,
equality label selectors on lists, and discovery of the resources the operator
and kopf use. As a real API server (``apiserver``): defaulting of the fields the
operator renders, server-side apply with field managers (``apply-patch+yaml``),
409 on a stale ``resourceVersion``, 422 on changes of immutable StatefulSet fields.
Every verb used is recorded per resource (``verbs``), to check RBAC against.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import uuid
from typing import Any

import aiohttp.web
import attrs
import kmock

from . import apiserver

TEST_CLIENT = "mqcluster-tests"

RESOURCES: dict[str, dict[str, Any]] = {
    "v1/pods": {"kind": "Pod"},
    "v1/services": {"kind": "Service"},
    "v1/configmaps": {"kind": "ConfigMap"},
    "v1/events": {"kind": "Event"},
    "v1/persistentvolumeclaims": {"kind": "PersistentVolumeClaim"},
    "v1/namespaces": {"kind": "Namespace", "namespaced": False},
    "apps/v1/statefulsets": {"kind": "StatefulSet", "subresources": {"status"}},
    "policy/v1/poddisruptionbudgets": {"kind": "PodDisruptionBudget", "subresources": {"status"}},
    "apiextensions.k8s.io/v1/customresourcedefinitions": {
        "kind": "CustomResourceDefinition", "namespaced": False,
    },
    "mqcluster.io/v1alpha1/controllers": {
        "kind": "Controller", "subresources": {"status"}, "shortnames": {"mqc"},
    },
    "mqcluster.io/v1alpha1/brokergroups": {
        "kind": "BrokerGroup", "subresources": {"status"}, "shortnames": {"bg"},
    },
}
KNOWN = frozenset(kmock.resource(key) for key in RESOURCES)
VERBS = {"get", "list", "watch", "create", "patch", "update", "delete"}


def matches(labels: dict[str, str], selector: str) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def accepts(view: kmock.View, request: kmock.Request) -> bool:
    """Whether ``request`` (the one being served) is seen by ``view``, without kmock's scan.

    kmock answers ``request in view`` by filtering the whole request history; for the
    chains of filters and priorities our reactions use, checking the criteria suffices.
    """
    if isinstance(view, kmock.Root):
        return True
    if isinstance(view, kmock.Filter):
        return bool(view.criteria(request)) and accepts(view._source, request)
    if isinstance(view, kmock.Priority):
        return accepts(view._source, request)
    return request in view


class FastMatching(kmock.RawHandler):
    """RawHandler's payload selection with ``accepts`` instead of a history scan."""

    __slots__ = ()

    async def _handle(self, request: kmock.Request) -> Any:
        priorities = [tuple(-p for p in payload.priorities) for payload in self._payloads]
        width = max((len(p) for p in priorities), default=0)
        padded = [p + (0,) * (width - len(p)) for p in priorities]
        order = sorted(range(len(padded)), key=lambda i: padded[i])
        for payload in [self._payloads[i] for i in order]:
            if accepts(payload._source, request) and not payload._disabled.is_set():
                try:
                    return await payload(request)
                # kmock exports it at its top level, though not in __all__
                except kmock.ReactionMismatchError:  # type: ignore[attr-defined]
                    payload._disabled.set()
                except NotImplementedError:
                    pass
        raise NotImplementedError("no reaction matches the request")


@attrs.define(kw_only=True)
class Emulator(kmock.KubernetesEmulator, FastMatching):
    _versions: Any = attrs.field(factory=lambda: itertools.count(1), init=False)
    _index: dict[Any, list[Any]] = attrs.field(factory=dict, init=False)
    _indexed: int = attrs.field(default=-1, init=False)
    managed: dict[Any, dict[str, set[apiserver.Path]]] = attrs.field(factory=dict, init=False)
    verbs: set[tuple[str, str, str]] = attrs.field(factory=set, init=False)
    """(API group, resource[/subresource], verb) of every request served, except those
    of the tests' own client (User-Agent ``TEST_CLIENT``)."""
    served: int = attrs.field(default=0, init=False)
    """Requests served to anyone but the tests' own client (the operator and kopf)."""
    applied: list[Any] = attrs.field(factory=list, init=False)
    """Keys of the objects server-side applied, one per request."""
    _applying: asyncio.Lock = attrs.field(factory=asyncio.Lock, init=False)
    """An apply is computed from the live object and stored as a merge patch (lists
    whole): two applies interleaved would store one list computed before the other."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        for key, info in RESOURCES.items():
            self.resources[key] = kmock.ResourceInfo(
                kind=info["kind"],
                singular=info["kind"].lower(),
                namespaced=info.get("namespaced", True),
                verbs=VERBS,
                subresources=info.get("subresources", set()),
                shortnames=info.get("shortnames", set()),
            )

    def _has_status(self, resource: Any) -> bool:
        for key in RESOURCES:
            if kmock.resource(key) == resource:
                return "status" in RESOURCES[key].get("subresources", set())
        return False

    def _stored(self, request: kmock.Request) -> dict[str, Any] | None:
        key: Any = (request.resource, request.namespace, request.name)
        if request.resource is None or key not in self.objects:
            return None
        obj = self.objects[key]
        return None if obj.deleted else dict(obj.raw)

    async def _serve_fetch(self, request: kmock.Request) -> kmock.Payload:
        """One object by name: a dict lookup (kmock scans every object)."""
        key: Any = (request.resource, request.namespace, request.name)
        if request.resource is None or request.name is None or key not in self.objects:
            return await super()._serve_fetch(request)
        obj = self.objects[key]
        if obj.deleted:
            raise kmock.KubernetesObjectNotFoundError()
        payload: kmock.Payload = obj.raw
        return payload

    def _prepare(self, request: kmock.Request) -> None:
        """Rewrite the request's data in place (kmock's filters track requests by identity)."""
        data = copy.deepcopy(request.data) if isinstance(request.data, dict) else request.data
        if request.action == kmock.action.CREATE and isinstance(data, dict):
            meta = data.setdefault("metadata", {})
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
            meta["resourceVersion"] = str(next(self._versions))
            meta["generation"] = 1
            if request.namespace and "namespace" not in meta:
                meta["namespace"] = request.namespace
            if self._has_status(request.resource):
                data.pop("status", None)
        elif request.action == kmock.action.UPDATE and isinstance(data, list):
            self._check_json_patch(request, data)
            version = str(next(self._versions))
            data = [*data, {"op": "add", "path": "/metadata/resourceVersion", "value": version}]
        elif request.action == kmock.action.UPDATE and isinstance(data, dict):
            current = self._stored(request) or {}
            self._check_version(self._stored(request), data)
            key = (request.resource, request.namespace, request.name)
            apiserver.take_update(self.managed.setdefault(key, {}),
                                  request.params.get("fieldManager") or "", data)
            kind = self._kind(request.resource)
            changes = apiserver.immutable_changes(
                kind, current, dict(apiserver.merge_patch(current, data)))
            if current and changes:
                raise kmock.KubernetesError(
                    status=422, reason="Invalid",
                    message=f"{kind} is invalid: spec: Forbidden: {', '.join(changes)}")
            if request.subresource == "status":
                data = {"status": data.get("status")}
            elif self._has_status(request.resource):
                data.pop("status", None)
            meta = data.setdefault("metadata", {}) or {}
            data["metadata"] = meta
            meta["resourceVersion"] = str(next(self._versions))
            if "spec" in data:
                new_spec = apiserver.merge_patch(current.get("spec") or {}, data["spec"] or {})
                if new_spec != current.get("spec"):
                    generation = (current.get("metadata") or {}).get("generation", 1)
                    meta["generation"] = generation + 1
        else:
            return
        object.__setattr__(request, "data", data)

    def _check_json_patch(self, request: kmock.Request, ops: list[Any]) -> None:
        """JSON-patch ``test`` ops fail with 422, as the API server answers a stale write."""
        current: Any = self._stored(request) or {}
        for op in ops:
            if not isinstance(op, dict) or op.get("op") != "test":
                continue
            node = current
            for part in str(op["path"]).strip("/").split("/"):
                node = node.get(part) if isinstance(node, dict) else None
            if node != op.get("value"):
                raise kmock.KubernetesError(
                    status=422, reason="Invalid",
                    message=f"the server rejected our request due to an error in our request: "
                            f"test of {op['path']} failed",
                )

    def _forget_old_requests(self, keep: int = 64) -> None:
        """kmock matches each request against the whole request history (quadratic);
        a long-running operator makes thousands of requests, so keep only the recent ones."""
        if len(self._requests) > 2 * keep:
            del self._requests[:-keep]
        for payload in self._payloads:
            history = getattr(payload, "_requests", None)
            if history is not None and len(history) > 2 * keep:
                del history[:-keep]

    async def _handle(self, request: kmock.Request) -> Any:
        self._forget_old_requests()
        if request.resource is not None:
            self._record_verb(request)
            try:
                check_integer_params(request)
                if is_apply(request):
                    async with self._applying:
                        await self._server_side_apply(request)
                        return await super()._handle(request)
                self._prepare(request)
            except kmock.KubernetesError as exc:
                return await self._render_error(exc)
        return await super()._handle(request)

    def _record_verb(self, request: kmock.Request) -> None:
        method = str(request.method.value if request.method else "").upper()
        if method == "GET":
            watching = request.params.get("watch") in ("true", "1")
            verb = "get" if request.name else "watch" if watching else "list"
        else:
            verb = {"POST": "create", "PATCH": "patch", "PUT": "update",
                    "DELETE": "delete"}.get(method, method.lower())
        resource: Any = request.resource
        if not resource.plural:
            return
        plural = resource.plural + (f"/{request.subresource}" if request.subresource else "")
        agent = next((v for k, v in request.headers.items() if k.lower() == "user-agent"), "")
        if not str(agent).startswith(TEST_CLIENT):
            self.served += 1
            self.verbs.add((resource.group or "", plural, verb))

    def _kind(self, resource: Any) -> str:
        for key, info in RESOURCES.items():
            if kmock.resource(key) == resource:
                return str(info["kind"])
        return ""

    async def _server_side_apply(self, request: kmock.Request) -> None:
        """``apply-patch+yaml``: compute the object as the API server would; kmock then
        stores it as the merge patch from the live object (nothing when nothing changed)."""
        manager = request.params.get("fieldManager")
        if not manager:
            raise kmock.KubernetesError(status=422, reason="Invalid",
                                        message="fieldManager is required for apply requests")
        applied = request.data if isinstance(request.data, dict) else {}
        key: Any = (request.resource, request.namespace, request.name)
        bus: Any = self._buses[request.resource]  # type: ignore[index]
        kind = self._kind(request.resource)
        live = self._stored(request)
        if request.subresource == "status":
            if live is None:
                raise kmock.KubernetesObjectNotFoundError()
            applied = {"status": applied.get("status") or {}}
        elif self._has_status(request.resource):
            applied = {k: v for k, v in applied.items() if k != "status"}
        self._check_version(live, applied)
        managed = self.managed.setdefault(key, {})
        try:
            new = apiserver.apply(live or {}, applied, manager, managed,
                                  force=request.params.get("force") == "true")
        except apiserver.Conflict as exc:
            raise kmock.KubernetesError(status=409, reason="Conflict", message=str(exc)) from exc
        new = apiserver.default(kind, new)
        self.applied.append(key)
        if live is None:
            # An apply that creates needs the create verb too.
            self.verbs.add((request.resource.group or "",  # type: ignore[union-attr]
                            str(request.resource.plural), "create"))  # type: ignore[union-attr]
            meta = new.setdefault("metadata", {})
            meta.update(name=request.name, namespace=request.namespace, uid=str(uuid.uuid4()),
                        creationTimestamp="2026-01-01T00:00:00Z", generation=1,
                        resourceVersion=str(next(self._versions)))
            new.update(apiVersion=applied.get("apiVersion"), kind=applied.get("kind"))
            async with self._lock:
                self._objects[key] = new
                await bus.put({"type": "ADDED", "object": new})
            object.__setattr__(request, "data", {})
            return
        changes = apiserver.immutable_changes(kind, live, new)
        if changes:
            raise kmock.KubernetesError(
                status=422, reason="Invalid",
                message=f"{kind}.apps \"{request.name}\" is invalid: spec: Forbidden: updates to "
                        f"statefulset spec for fields other than 'replicas', 'ordinals', "
                        f"'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' "
                        f"and 'minReadySeconds' are forbidden ({', '.join(changes)})",
            )
        patch = merge_diff(live, new)
        if patch:
            meta = patch.setdefault("metadata", {})
            meta["resourceVersion"] = str(next(self._versions))
            if "spec" in patch:
                meta["generation"] = (live.get("metadata") or {}).get("generation", 1) + 1
        object.__setattr__(request, "data", patch)

    @staticmethod
    def _check_version(live: dict[str, Any] | None, data: Any) -> None:
        """A write naming a resourceVersion other than the live one is stale: 409."""
        wanted = ((data or {}).get("metadata") or {}).get("resourceVersion") \
            if isinstance(data, dict) else None
        current = ((live or {}).get("metadata") or {}).get("resourceVersion")
        if wanted is not None and live is not None and str(wanted) != str(current):
            raise kmock.KubernetesError(
                status=409, reason="Conflict",
                message="Operation cannot be fulfilled: the object has been modified; "
                        "please apply your changes to the latest version and try again",
            )

    def _keys_of(self, resource: Any) -> list[Any]:
        """Keys of the stored objects of one resource (an index rebuilt when objects are added)."""
        if self._indexed != len(self.objects):
            index: dict[Any, list[Any]] = {}
            for key, _ in self.objects.items():
                index.setdefault(key[0], []).append(key)
            self._index, self._indexed = index, len(self.objects)
        return list(self._index.get(resource, ()))

    async def _render_error(self, exc: Exception) -> Any:
        """Errors as kmock renders them, without formatting a traceback for expected ones."""
        if isinstance(exc, kmock.KubernetesError):
            return aiohttp.web.json_response({
                "apiVersion": "v1", "kind": "Status", "metadata": {}, "code": exc.status,
                "status": "Failure", "reason": exc.reason or type(exc).__name__,
                "message": exc.message or repr(exc), "details": exc.details or {},
            }, status=exc.status)
        return await super()._render_error(exc)

    async def _serve_list(self, request: kmock.Request) -> kmock.Payload:
        known = request.resource in KNOWN
        result: Any
        if known:
            items = []
            for key in self._keys_of(request.resource):
                if request.namespace is not None and key[1] != request.namespace:
                    continue
                if key in self.objects and not self.objects[key].deleted:
                    items.append(self.objects[key].raw)
            result = {"metadata": {"resourceVersion": "..."}, "items": items}
        else:
            result = await super()._serve_list(request)
        selector = request.params.get("labelSelector")
        if selector and isinstance(result, dict):
            result["items"] = [
                item for item in result["items"]
                if matches((item.get("metadata") or {}).get("labels") or {}, selector)
            ]
        payload: kmock.Payload = result
        return payload

    def live(self, plural: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The current object, or None."""
        key = (kmock.resource(plural), namespace, name)
        if key not in self.objects:
            return None
        obj = self.objects[key]
        return None if obj.deleted else dict(obj.raw)

    def all(self, plural: str) -> list[dict[str, Any]]:
        return [
            dict(obj.raw) for (res, _, _), obj in self.objects.items()
            if res == kmock.resource(plural) and not obj.deleted
        ]


INTEGER_PARAMS = ("timeoutSeconds", "limit", "gracePeriodSeconds")


def check_integer_params(request: kmock.Request) -> None:
    """The API server parses these query parameters as integers (strconv.ParseInt):
    ``timeoutSeconds=300.0`` gets a 400, as kopf's float watch timeout once did."""
    for name in INTEGER_PARAMS:
        raw = (request.params or {}).get(name)
        if raw is None:
            continue
        try:
            int(str(raw))
        except ValueError:
            raise kmock.KubernetesError(
                status=400, reason="BadRequest",
                message=f'strconv.ParseInt: parsing "{raw}": invalid syntax') from None


def is_apply(request: kmock.Request) -> bool:
    content_type = next(
        (v for k, v in request.headers.items() if k.lower() == "content-type"), "")
    return (request.action == kmock.action.UPDATE and request.name is not None
            and str(content_type).startswith("application/apply-patch"))


def merge_diff(old: Any, new: Any) -> Any:
    """The JSON merge patch turning ``old`` into ``new`` (None: removed; lists whole)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return copy.deepcopy(new)
    patch: dict[str, Any] = {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        if key not in old:
            patch[key] = copy.deepcopy(value)
        elif old[key] != value:
            patch[key] = merge_diff(old[key], value) if isinstance(value, dict) and isinstance(
                old[key], dict) else copy.deepcopy(value)
    return patch
