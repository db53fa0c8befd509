"""The one module that talks to the Kubernetes API (besides kopf itself).

A small aiohttp client configured from kopf's ConnectionInfo: get, list by
labels, create, merge-patch (also of the status subresource), delete, and an
idempotent ``apply`` that creates an object or patches what differs.
"""

from __future__ import annotations

import base64
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
import kopf

from .names import API_VERSION

Obj = dict[str, Any]

PLURALS: dict[tuple[str, str], str] = {
    ("v1", "ConfigMap"): "configmaps",
    ("v1", "Service"): "services",
    ("v1", "Pod"): "pods",
    ("v1", "Event"): "events",
    ("apps/v1", "StatefulSet"): "statefulsets",
    ("policy/v1", "PodDisruptionBudget"): "poddisruptionbudgets",
    (API_VERSION, "Controller"): "controllers",
    (API_VERSION, "BrokerGroup"): "brokergroups",
}

# Fields the API server owns: never compared nor patched by ``apply``.
SERVER_FIELDS = ("status",)


class ApiError(Exception):
    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class Ref:
    api_version: str
    kind: str
    namespace: str
    name: str = ""

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Ref:
        meta = obj["metadata"]
        return cls(obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta.get("name", ""))

    def path(self, subresource: str | None = None) -> str:
        plural = PLURALS[(self.api_version, self.kind)]
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        path = f"{base}/namespaces/{quote(self.namespace)}/{plural}"
        if self.name:
            path += f"/{quote(self.name)}"
        if subresource:
            path += f"/{subresource}"
        return path


def differs(desired: Any, observed: Any) -> bool:
    """Whether ``observed`` lacks anything ``desired`` sets (dicts compared key by key)."""
    if isinstance(desired, Mapping) and isinstance(observed, Mapping):
        return any(differs(v, observed.get(k)) for k, v in desired.items())
    return bool(desired != observed)


def apply_patch(desired: Obj) -> Obj:
    """The merge patch that makes an object match ``desired`` (metadata we own, spec/data)."""
    meta = desired["metadata"]
    patch: Obj = {
        "metadata": {
            key: meta[key] for key in ("labels", "annotations", "ownerReferences") if key in meta
        }
    }
    for key, value in desired.items():
        if key not in ("apiVersion", "kind", "metadata", *SERVER_FIELDS):
            patch[key] = value
    return patch


def ssl_context(info: kopf.ConnectionInfo) -> ssl.SSLContext | bool:
    if not info.server.startswith("https"):
        return False
    if info.insecure:
        return False
    ctx = ssl.create_default_context()
    if info.ca_path:
        ctx.load_verify_locations(cafile=info.ca_path)
    elif info.ca_data:
        data = info.ca_data if isinstance(info.ca_data, str) else info.ca_data.decode()
        ctx.load_verify_locations(cadata=_pem(data))
    cert, key = info.certificate_path, info.private_key_path
    with tempfile.TemporaryDirectory() as tmp:
        if info.certificate_data and info.private_key_data:
            cert, key = f"{tmp}/cert.pem", f"{tmp}/key.pem"
            _write(cert, info.certificate_data)
            _write(key, info.private_key_data)
        if cert and key:
            ctx.load_cert_chain(certfile=cert, keyfile=key)
    return ctx


def _pem(data: str) -> str:
    return data if "-----BEGIN" in data else base64.b64decode(data).decode()


def _write(path: str, data: str | bytes) -> None:
    text = data if isinstance(data, str) else data.decode()
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(_pem(text))


def auth_headers(info: kopf.ConnectionInfo) -> dict[str, str]:
    if info.token:
        return {"Authorization": f"{info.scheme or 'Bearer'} {info.token}"}
    if info.username and info.password:
        raw = base64.b64encode(f"{info.username}:{info.password}".encode()).decode()
        return {"Authorization": f"Basic {raw}"}
    return {}


class Api:
    """Kubernetes API calls used by the operator; configure() with kopf's credentials."""

    def __init__(self, info: kopf.ConnectionInfo | None = None, timeout: float = 10.0) -> None:
        self._info = info
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    def configure(self, info: kopf.ConnectionInfo) -> None:
        self._info = info
        self._session = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _get_session(self) -> tuple[aiohttp.ClientSession, kopf.ConnectionInfo]:
        if self._info is None:
            raise RuntimeError("the Kubernetes API client is not configured (no login yet)")
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=ssl_context(self._info))
            self._session = aiohttp.ClientSession(
                base_url=self._info.server.rstrip("/"),
                connector=connector,
                headers=auth_headers(self._info),
                timeout=self._timeout,
            )
        return self._session, self._info

    async def _call(
        self, method: str, path: str, *, body: Any = None, params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Any:
        session, _ = self._get_session()
        headers = {"Content-Type": content_type} if body is not None else {}
        async with session.request(
            method, path, json=body, params=params, headers=headers
        ) as resp:
            data = await resp.json(content_type=None) if resp.content_length != 0 else None
            if resp.status >= 400:
                data = data if isinstance(data, dict) else {}
                raise ApiError(resp.status, str(data.get("reason", resp.reason)),
                               str(data.get("message", "")))
            return data

    async def get(self, ref: Ref) -> Obj | None:
        try:
            result: Obj = await self._call("GET", ref.path())
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return result

    async def list(self, ref: Ref, labels: Mapping[str, str]) -> list[Obj]:
        selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        data = await self._call("GET", ref.path(), params={"labelSelector": selector})
        items: list[Obj] = list(data.get("items", []))
        for item in items:
            item.setdefault("apiVersion", ref.api_version)
            item.setdefault("kind", ref.kind)
        return items

    async def create(self, obj: Obj) -> Obj:
        ref = Ref.of(obj)
        result: Obj = await self._call("POST", Ref(ref.api_version, ref.kind, ref.namespace).path(),
                                       body=obj)
        return result

    async def patch(self, ref: Ref, patch: Obj, subresource: str | None = None) -> Obj:
        result: Obj = await self._call(
            "PATCH", ref.path(subresource), body=patch, content_type="application/merge-patch+json"
        )
        return result

    async def delete(self, ref: Ref) -> bool:
        try:
            await self._call("DELETE", ref.path())
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def apply(self, desired: Obj) -> str:
        """Create ``desired`` or patch the fields that differ: "created", "patched", "unchanged"."""
        ref = Ref.of(desired)
        observed = await self.get(ref)
        if observed is None:
            try:
                await self.create(desired)
                return "created"
            except ApiError as exc:
                if exc.status != 409:
                    raise
                observed = await self.get(ref)
        patch = apply_patch(desired)
        if observed is not None and not differs(patch, observed):
            return "unchanged"
        await self.patch(ref, patch)
        return "patched"

    async def post_event(self, event: Obj) -> None:
        """Post an Event; one with the same name (same reason, message and time) is kept."""
        try:
            await self.create(event)
        except ApiError as exc:
            if exc.status != 409:
                raise
