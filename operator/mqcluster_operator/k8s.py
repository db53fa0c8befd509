"""The one module that talks to the Kubernetes API (besides kopf itself).

A small aiohttp client configured from kopf's ConnectionInfo: get, list by
labels, create, merge-patch (also of the status subresource), delete, and
``apply``: server-side apply under the operator's field manager, so the API server
creates the object or updates what changed, removes the fields the operator no
longer sets and leaves alone the fields it defaults or others own.
"""

from __future__ import annotations

import base64
import json
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
import kopf

from . import conditions
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

# Fields the API server owns: never sent by ``apply``.
SERVER_FIELDS = ("status",)
# The field manager of everything the operator applies (server-side apply).
FIELD_MANAGER = "mqcluster-operator"
APPLY_PATCH = "application/apply-patch+yaml"


class ApiError(Exception):
    def __init__(
        self, status: int, reason: str, message: str, retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        """Worth retrying: throttled (429), a conflict (409) or a server-side failure (5xx)."""
        return self.status in (409, 429) or self.status >= 500


def _json_or_none(text: str) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _seconds(value: str | None) -> float | None:
    """A ``Retry-After`` header in seconds (the HTTP-date form is not used by the API server)."""
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


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
    """Whether ``observed`` lacks anything ``desired`` sets (dicts compared key by key).

    Only for the custom resources' status, which the operator alone writes and the API
    server never defaults; children are compared by the API server (``apply``)."""
    if isinstance(desired, Mapping) and isinstance(observed, Mapping):
        return any(differs(v, observed.get(k)) for k, v in desired.items())
    return bool(desired != observed)


def apply_body(desired: Obj) -> Obj:
    """The server-side apply configuration: the fields the operator owns, nothing read back."""
    return {key: value for key, value in desired.items() if key not in SERVER_FIELDS}


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

    def __init__(
        self, info: kopf.ConnectionInfo | None = None, timeout: float = 10.0,
        user_agent: str = FIELD_MANAGER,
    ) -> None:
        self._info = info
        self._user_agent = user_agent
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        self._stale: list[aiohttp.ClientSession] = []

    def configure(self, info: kopf.ConnectionInfo) -> None:
        """New credentials (a re-login, maybe from a thread): the next call closes the old
        session and opens a new one."""
        self._info = info
        old, self._session = self._session, None
        if old is not None:
            self._stale.append(old)

    async def close(self) -> None:
        await self._close_stale()
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _close_stale(self) -> None:
        while self._stale:
            await self._stale.pop().close()

    def _get_session(self) -> tuple[aiohttp.ClientSession, kopf.ConnectionInfo]:
        if self._info is None:
            raise RuntimeError("the Kubernetes API client is not configured (no login yet)")
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=ssl_context(self._info))
            self._session = aiohttp.ClientSession(
                base_url=self._info.server.rstrip("/"),
                connector=connector,
                headers={**auth_headers(self._info), "User-Agent": self._user_agent},
                timeout=self._timeout,
            )
        return self._session, self._info

    async def _call(
        self, method: str, path: str, *, body: Any = None, params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Any:
        await self._close_stale()
        session, _ = self._get_session()
        headers = {"Content-Type": content_type} if body is not None else {}
        async with session.request(
            method, path, json=body, params=params, headers=headers
        ) as resp:
            text = await resp.text()
            data = _json_or_none(text)
            if resp.status >= 400:
                raise ApiError(
                    resp.status,
                    str(data.get("reason", resp.reason)) if isinstance(data, dict) else
                    str(resp.reason),
                    str(data.get("message", "")) if isinstance(data, dict) else text[:200],
                    retry_after=_seconds(resp.headers.get("Retry-After")),
                )
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
        """Server-side apply of ``desired`` (created if absent); the operator owns every field
        it sets (``force``), and a field it stops setting is removed by the API server."""
        body = apply_body(desired)
        await self._call("PATCH", Ref.of(desired).path(), body=body, content_type=APPLY_PATCH,
                         params={"fieldManager": FIELD_MANAGER, "force": "true"})
        return "applied"

    async def write_status(
        self, ref: Ref, status: Mapping[str, Any], writer: conditions.Writer,
    ) -> None:
        """Write status fields (merge patch of the status subresource); the ``conditions``
        among them are server-side applied under ``writer``'s field manager, only the
        entries of the types ``writer`` owns (the other writers' entries stay)."""
        rest = {k: v for k, v in status.items() if k != "conditions"}
        if "conditions" in status:
            body = {
                "apiVersion": ref.api_version, "kind": ref.kind,
                "metadata": {"name": ref.name, "namespace": ref.namespace},
                "status": {"conditions": writer.own(status["conditions"] or [])},
            }
            await self._call("PATCH", ref.path("status"), body=body, content_type=APPLY_PATCH,
                             params={"fieldManager": writer.field_manager, "force": "true"})
        if rest:
            await self.patch(ref, {"status": rest}, "status")

    async def post_event(self, event: Obj) -> None:
        """Post an Event; one with the same name (same reason, message and time) is kept."""
        try:
            await self.create(event)
        except ApiError as exc:
            if exc.status != 409:
                raise
