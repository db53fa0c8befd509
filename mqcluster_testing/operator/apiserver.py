"""What a real API server does to writes that the operator's behaviour depends on.

Pure functions over JSON objects, used by the emulator:

- defaulting of the fields the operator renders but leaves to the server
  (containers, probes, StatefulSet and Service spec fields);
- server-side apply: each field manager owns the leaf fields of its last applied
  configuration; a field it owned and no longer applies is removed (unless another
  manager owns it too); applying a value owned by another manager is a conflict
  unless forced; lists are atomic, except list maps (``conditions`` keyed by ``type``);
- immutable StatefulSet fields.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

Obj = dict[str, Any]
Path = tuple[str, ...]

# List maps and their key (every other list is atomic: owned and replaced as a whole).
LIST_MAP_KEYS = {"conditions": "type"}

PROBE_DEFAULTS = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1,
                  "failureThreshold": 3}
STS_IMMUTABLE = ("selector", "serviceName", "volumeClaimTemplates", "podManagementPolicy")


class Conflict(Exception):
    """Applying a field another manager owns with another value, without force."""


def _container(container: Obj) -> None:
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    image = str(container.get("image", ""))
    container.setdefault("imagePullPolicy", "Always" if image.endswith(":latest") or
                         ":" not in image.rsplit("/", 1)[-1] else "IfNotPresent")
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        if isinstance(container.get(probe), dict):
            for key, value in PROBE_DEFAULTS.items():
                container[probe].setdefault(key, value)


def _pod_spec(spec: Obj) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("terminationGracePeriodSeconds", 30)
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        _container(container)


def default(kind: str, obj: Obj) -> Obj:
    """``obj`` with the API server's defaults filled in (a new object)."""
    out = copy.deepcopy(obj)
    spec = out.get("spec")
    if not isinstance(spec, dict):
        return out
    if kind == "StatefulSet":
        spec.setdefault("podManagementPolicy", "OrderedReady")
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("updateStrategy", {"type": "RollingUpdate",
                                           "rollingUpdate": {"partition": 0}})
        pod = (spec.get("template") or {}).get("spec")
        if isinstance(pod, dict):
            _pod_spec(pod)
        for claim in spec.get("volumeClaimTemplates") or []:
            claim.setdefault("apiVersion", "v1")
            claim.setdefault("kind", "PersistentVolumeClaim")
            claim.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
    elif kind == "Service":
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
    elif kind == "Pod":
        _pod_spec(spec)
    return out


def leaves(value: Any, prefix: Path = ()) -> Iterator[tuple[Path, Any]]:
    """The owned fields of an applied configuration: (path, value) of each leaf."""
    if isinstance(value, dict) and value:
        for key, child in value.items():
            yield from leaves(child, (*prefix, str(key)))
    elif isinstance(value, list) and prefix and prefix[-1] in LIST_MAP_KEYS:
        key = LIST_MAP_KEYS[prefix[-1]]
        for item in value:
            yield from leaves(item, (*prefix, f"[{key}={item[key]}]"))
    else:
        yield prefix, value


def _child(node: Any, part: str, create: bool) -> Any:
    if part.startswith("["):
        key, _, wanted = part[1:-1].partition("=")
        for item in node if isinstance(node, list) else []:
            if isinstance(item, dict) and str(item.get(key)) == wanted:
                return item
        if not create or not isinstance(node, list):
            return None
        item = {key: wanted}
        node.append(item)
        return item
    if not isinstance(node, dict):
        return None
    if part not in node and create:
        node[part] = {}
    return node.get(part)


def get(obj: Any, path: Path) -> Any:
    node = obj
    for part in path:
        node = _child(node, part, create=False)
        if node is None:
            return None
    return node


def put(obj: Obj, path: Path, value: Any) -> None:
    node: Any = obj
    for index, part in enumerate(path[:-1]):
        nxt = _child(node, part, create=True)
        if nxt is None or (isinstance(nxt, dict) and not nxt and
                           path[index + 1].startswith("[")):
            nxt = [] if path[index + 1].startswith("[") else {}
            node[part] = nxt
        node = nxt
    last = path[-1]
    if last.startswith("["):
        item = _child(node, last, create=True)
        item.clear()
        item.update(copy.deepcopy(value) if isinstance(value, dict) else {})
    else:
        node[last] = copy.deepcopy(value)


def remove(obj: Obj, path: Path) -> None:
    """Remove one field, and the maps and list-map entries it leaves empty; removing the
    key of a list-map entry removes the entry."""
    if len(path) > 1 and path[-2].startswith("[") and path[-1] == path[-2][1:].split("=")[0]:
        remove(obj, path[:-1])
        return
    parent = get(obj, path[:-1]) if len(path) > 1 else obj
    last = path[-1]
    if last.startswith("[") and isinstance(parent, list):
        item = _child(parent, last, create=False)
        if item is not None:
            parent.remove(item)
    elif isinstance(parent, dict):
        parent.pop(last, None)
    if len(path) > 1 and parent in ({}, []):
        remove(obj, path[:-1])


def apply(
    live: Obj, applied: Obj, manager: str, managed: dict[str, set[Path]], *, force: bool,
) -> Obj:
    """Server-side apply of ``applied`` by ``manager`` onto ``live``; updates ``managed``."""
    out = copy.deepcopy(live)
    fields = dict(leaves({k: v for k, v in applied.items() if k not in ("apiVersion", "kind")}))
    fields.pop(("metadata", "name"), None)
    fields.pop(("metadata", "namespace"), None)
    others = {m: paths for m, paths in managed.items() if m != manager}
    for path, value in fields.items():
        owners = [m for m, paths in others.items() if path in paths]
        if owners and get(out, path) != value:
            if not force:
                raise Conflict(f"conflict with {owners} on .{'.'.join(path)}")
            for owner in owners:
                others[owner].discard(path)
    for path in managed.get(manager, set()) - set(fields):
        if not any(path in paths for paths in others.values()):
            remove(out, path)
    for path, value in fields.items():
        put(out, path, value)
    managed[manager] = set(fields)
    return out


def take_update(managed: dict[str, set[Path]], manager: str, patch: Any) -> None:
    """A non-apply write (merge patch) by ``manager``: it becomes the owner of what it set."""
    if not isinstance(patch, dict):
        return
    fields = {path for path, value in leaves(patch) if value is not None}
    for other, paths in managed.items():
        if other != manager:
            paths -= fields
    managed.setdefault(manager, set()).update(fields)


def merge_patch(target: Any, patch: Any) -> Any:
    """``patch`` applied to ``target`` as a JSON merge patch (RFC 7386), as the API server
    applies ``application/merge-patch+json``: ``None`` removes a key, objects merge key by
    key, anything else (lists included) replaces. Neither argument is changed."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def immutable_changes(kind: str, live: Obj, new: Obj) -> list[str]:
    if kind != "StatefulSet":
        return []
    old_spec, new_spec = live.get("spec") or {}, new.get("spec") or {}
    return [f"spec.{key}" for key in STS_IMMUTABLE if old_spec.get(key) != new_spec.get(key)]
