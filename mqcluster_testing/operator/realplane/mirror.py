"""A namespace's objects as the API server has them, kept current by list and watch.

Tests read it synchronously with the emulator's calls (``live(plural, namespace, name)``,
``all(plural)``), so a check polled by ``eventually`` costs no request; the node agent
is told of every pod change (``listen``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from mqcluster_operator.k8s import ApiError

from .controlplane import KubeApi

# Emulator-style plural -> (apiVersion, kind, path under the namespace).
RESOURCES: dict[str, tuple[str, str, str]] = {
    "v1/pods": ("v1", "Pod", "/api/v1/namespaces/{ns}/pods"),
    "v1/events": ("v1", "Event", "/api/v1/namespaces/{ns}/events"),
    "v1/configmaps": ("v1", "ConfigMap", "/api/v1/namespaces/{ns}/configmaps"),
    "v1/services": ("v1", "Service", "/api/v1/namespaces/{ns}/services"),
    "v1/persistentvolumeclaims": (
        "v1", "PersistentVolumeClaim", "/api/v1/namespaces/{ns}/persistentvolumeclaims"),
    "apps/v1/statefulsets": (
        "apps/v1", "StatefulSet", "/apis/apps/v1/namespaces/{ns}/statefulsets"),
    "policy/v1/poddisruptionbudgets": (
        "policy/v1", "PodDisruptionBudget",
        "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"),
    "brokergroups.v1alpha1.mqcluster.io": (
        "mqcluster.io/v1alpha1", "BrokerGroup",
        "/apis/mqcluster.io/v1alpha1/namespaces/{ns}/brokergroups"),
    "controllers.v1alpha1.mqcluster.io": (
        "mqcluster.io/v1alpha1", "Controller",
        "/apis/mqcluster.io/v1alpha1/namespaces/{ns}/controllers"),
}

Listener = Callable[[str, str, dict[str, Any]], None]
"""Called with (plural, event type, object) after the mirror has taken the change."""


@dataclass
class Mirror:
    api: KubeApi
    namespace: str
    plurals: tuple[str, ...] = tuple(RESOURCES)
    objects: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    listeners: list[Listener] = field(default_factory=list)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def live(self, plural: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The object as last seen, or None (the namespace must be the mirror's)."""
        if namespace != self.namespace:
            return None
        return self.objects.get(plural, {}).get(name)

    def all(self, plural: str) -> list[dict[str, Any]]:
        return list(self.objects.get(plural, {}).values())

    def listen(self, listener: Listener) -> None:
        self.listeners.append(listener)

    async def start(self) -> None:
        """Lists every resource first: the mirror is current when this returns."""
        versions = await asyncio.gather(*(self._list(p) for p in self.plurals))
        self._tasks = [asyncio.create_task(self._follow(p, v), name=f"mirror {p}")
                       for p, v in zip(self.plurals, versions, strict=True)]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _path(self, plural: str) -> str:
        return RESOURCES[plural][2].format(ns=self.namespace)

    async def _list(self, plural: str) -> str:
        api_version, kind, _ = RESOURCES[plural]
        data = await self.api.request("GET", self._path(plural))
        fresh = {}
        for item in data.get("items", []):
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
            fresh[item["metadata"]["name"]] = item
        old = self.objects.get(plural, {})
        self.objects[plural] = fresh
        for name, obj in old.items():
            if name not in fresh:
                self._tell(plural, "DELETED", obj)
        for obj in fresh.values():
            self._tell(plural, "MODIFIED", obj)
        return str(data["metadata"]["resourceVersion"])

    def _tell(self, plural: str, kind: str, obj: dict[str, Any]) -> None:
        for listener in self.listeners:
            listener(plural, kind, obj)

    async def _follow(self, plural: str, version: str) -> None:
        store = self.objects[plural]
        while True:
            try:
                async for event in self.api.watch(self._path(plural), version):
                    kind, obj = event["type"], event["object"]
                    if kind == "ERROR":  # 410 Gone: the version is too old to resume
                        version = ""
                        break
                    version = obj["metadata"]["resourceVersion"]
                    if kind == "BOOKMARK":
                        continue
                    name = obj["metadata"]["name"]
                    if kind == "DELETED":
                        store.pop(name, None)
                    else:
                        store[name] = obj
                    self._tell(plural, kind, obj)
            except (TimeoutError, ApiError, aiohttp.ClientError, ValueError):
                await asyncio.sleep(0.2)
            if not version:
                with contextlib.suppress(ApiError, aiohttp.ClientError, TimeoutError):
                    version = await self._list(plural)
                    store = self.objects[plural]
