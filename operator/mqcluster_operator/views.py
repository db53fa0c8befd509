"""Reads served from kopf indices, which kopf's watches keep current: the daemons and
the reconciliation read their BrokerGroup, Controller, StatefulSet and pods from here
instead of asking the API server on every step."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import kopf

from . import names
from .k8s import Obj, Ref

# kopf index ids; each arrives as a keyword argument of the handlers and daemons.
INDICES = {
    (names.API_VERSION, "BrokerGroup"): "mqcluster_brokergroups",
    (names.API_VERSION, "Controller"): "mqcluster_controllers",
    ("apps/v1", "StatefulSet"): "mqcluster_statefulsets",
    ("v1", "Pod"): "mqcluster_pods",
}


class Reads(Protocol):
    async def get(self, ref: Ref) -> Obj | None: ...

    async def list(self, ref: Ref, labels: Mapping[str, str]) -> list[Obj]: ...


def index_by_name(body: kopf.Body, **_: Any) -> dict[tuple[str, str], Obj]:
    meta = body.get("metadata") or {}
    return {(str(meta.get("namespace", "")), str(meta.get("name", ""))): dict(body)}


def index_pods_by_instance(body: kopf.Body, **_: Any) -> dict[tuple[str, str], Obj]:
    meta = body.get("metadata") or {}
    instance = str((meta.get("labels") or {}).get(names.LABEL_INSTANCE, ""))
    return {(str(meta.get("namespace", "")), instance): dict(body)}


class IndexedReads:
    """``Reads`` from the indices passed to a handler (``kwargs``)."""

    def __init__(self, kwargs: Mapping[str, Any]) -> None:
        self._indices = {key: kwargs[index] for key, index in INDICES.items() if index in kwargs}

    async def get(self, ref: Ref) -> Obj | None:
        index = self._indices[(ref.api_version, ref.kind)]
        for obj in index.get((ref.namespace, ref.name), ()):
            return {"apiVersion": ref.api_version, "kind": ref.kind, **obj}
        return None

    async def list(self, ref: Ref, labels: Mapping[str, str]) -> list[Obj]:
        """Pods by their instance label, other kinds by namespace; then every label asked for."""
        index = self._indices[(ref.api_version, ref.kind)]
        if ref.kind == "Pod":
            found = list(index.get((ref.namespace, labels.get(names.LABEL_INSTANCE, "")), ()))
        else:
            found = [obj for (ns, _), store in index.items() if ns == ref.namespace
                     for obj in store]
        return [
            {"apiVersion": ref.api_version, "kind": ref.kind, **obj} for obj in found
            if all(((obj.get("metadata") or {}).get("labels") or {}).get(k) == v
                   for k, v in labels.items())
        ]


def register(registry: kopf.OperatorRegistry) -> None:
    kopf.index(names.GROUP, names.VERSION, "brokergroups", registry=registry,
               id=INDICES[(names.API_VERSION, "BrokerGroup")])(index_by_name)
    kopf.index(names.GROUP, names.VERSION, "controllers", registry=registry,
               id=INDICES[(names.API_VERSION, "Controller")])(index_by_name)
    kopf.index("apps", "v1", "statefulsets", registry=registry,
               labels={names.LABEL_INSTANCE: kopf.PRESENT},
               id=INDICES[("apps/v1", "StatefulSet")])(index_by_name)
    kopf.index("", "v1", "pods", registry=registry,
               labels={names.LABEL_INSTANCE: kopf.PRESENT},
               id=INDICES[("v1", "Pod")])(index_pods_by_instance)
