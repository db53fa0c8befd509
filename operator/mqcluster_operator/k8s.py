"""The one module that talks to the Kubernetes API (besides kopf itself).

Requests go through kubernetes_asyncio's ApiClient (its configuration, TLS, auth and
connection pool), configured from kopf's ConnectionInfo; this module adds what the
operator needs on top: get, list by labels, create, merge-patch (also of the status
subresource), delete, and ``apply``: server-side apply under the operator's field
manager, so the API server creates the object or updates what changed, removes the
fields the operator no longer sets and leaves alone the fields it defaults or others
own. Objects stay plain dicts (the generated models would drop fields of our custom
resources), and every error becomes ``ApiError`` with the status, the reason, and the
``Retry-After`` the server asked for, whatever the body holds.
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
import kopf
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.client.exceptions import ApiException

from . import conditions, metrics
from .names import API_VERSION

Obj = dict[str, Any]

PLURALS: dict[tuple[str, str], str] = {
    ("v1", "ConfigMap"): "configmaps",
    ("v1", "Service"): "services",
    ("v1", "Pod"): "pods",
    ("v1", "Event"): "events",
    ("v1", "PersistentVolumeClaim"): "persistentvolumeclaims",
    ("apps/v1", "StatefulSet"): "statefulsets",
    ("policy/v1", "PodDisruptionBudget"): "poddisruptionbudgets",
    ("apps/v1", "Deployment"): "deployments",
    ("autoscaling/v2", "HorizontalPodAutoscaler"): "horizontalpodautoscalers",
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


def client_configuration(info: kopf.ConnectionInfo, files: str) -> Configuration:
    """kubernetes_asyncio's configuration for kopf's credentials; certificate data is
    written under ``files`` (a directory that must live until the client exists)."""
    cfg = Configuration(host=info.server.rstrip("/"))
    cfg.verify_ssl = not info.insecure
    if info.token:
        cfg.api_key = {"BearerToken": info.token}
        cfg.api_key_prefix = {"BearerToken": info.scheme or "Bearer"}
    cfg.ssl_ca_cert = _path(info.ca_path) or _file(files, "ca.pem", info.ca_data)
    cfg.cert_file = (_path(info.certificate_path)
                     or _file(files, "cert.pem", info.certificate_data))
    cfg.key_file = _path(info.private_key_path) or _file(files, "key.pem", info.private_key_data)
    return cfg


def _path(value: Any) -> str | None:
    return os.fsdecode(value) if value else None


def _file(directory: str, name: str, data: str | bytes | None) -> str | None:
    if not data:
        return None
    text = data if isinstance(data, str) else data.decode()
    path = f"{directory}/{name}"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text if "-----BEGIN" in text else base64.b64decode(text).decode())
    return path


def basic_auth(info: kopf.ConnectionInfo) -> str | None:
    if info.token or not (info.username and info.password):
        return None
    return "Basic " + base64.b64encode(f"{info.username}:{info.password}".encode()).decode()


class Api:
    """Kubernetes API calls used by the operator; configure() with kopf's credentials."""

    def __init__(
        self, info: kopf.ConnectionInfo | None = None, timeout: float = 10.0,
        user_agent: str = FIELD_MANAGER,
    ) -> None:
        self._info = info
        self._user_agent = user_agent
        self._timeout = timeout
        self._client: ApiClient | None = None
        self._stale: list[ApiClient] = []

    def configure(self, info: kopf.ConnectionInfo) -> None:
        """New credentials (a re-login, maybe from a thread): the next call closes the old
        client and opens a new one."""
        self._info = info
        old, self._client = self._client, None
        if old is not None:
            self._stale.append(old)

    async def close(self) -> None:
        await self._close_stale()
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def _close_stale(self) -> None:
        while self._stale:
            await self._stale.pop().close()

    def _get_client(self) -> ApiClient:
        if self._info is None:
            raise RuntimeError("the Kubernetes API client is not configured (no login yet)")
        if self._client is None:
            with tempfile.TemporaryDirectory() as files:  # read when the client is made
                client = ApiClient(client_configuration(self._info, files))
            client.user_agent = self._user_agent
            basic = basic_auth(self._info)
            if basic is not None:
                client.set_default_header("Authorization", basic)
            self._client = client
        return self._client

    async def _call(
        self, method: str, path: str, *, body: Any = None, params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Any:
        await self._close_stale()
        client = self._get_client()
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        metrics.API_REQUESTS.labels(method).inc()
        try:
            data, _, _ = await client.call_api(
                path, method, query_params=list((params or {}).items()),
                header_params=headers, body=body, auth_settings=["BearerToken"],
                response_types_map={200: "object", 201: "object", 202: "object"},
                _request_timeout=self._timeout,
            )
        except (aiohttp.ClientError, TimeoutError, OSError):
            metrics.API_ERRORS.labels(method, "unreachable").inc()
            raise
        except ApiException as exc:
            metrics.API_ERRORS.labels(method, str(exc.status or 0)).inc()
            text = exc.body if isinstance(exc.body, str) else (exc.body or b"").decode(
                errors="replace")
            detail = _json_or_none(text)
            headers_in: Mapping[str, str] = exc.headers or {}
            retry = headers_in.get("Retry-After")
            raise ApiError(
                int(exc.status or 0),
                str(detail.get("reason", exc.reason)) if isinstance(detail, dict)
                else str(exc.reason),
                str(detail.get("message", "")) if isinstance(detail, dict) else text[:200],
                retry_after=_seconds(retry),
            ) from None
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
        fields_first: bool = False,
    ) -> None:
        """Write status fields (merge patch of the status subresource); the ``conditions``
        among them are server-side applied under ``writer``'s field manager, only the
        entries of the types ``writer`` owns (the other writers' entries stay).
        ``fields_first``: the fields before the conditions (a failover's new master)."""
        rest = {k: v for k, v in status.items() if k != "conditions"}
        if rest and fields_first:
            await self.patch(ref, {"status": rest}, "status")
            rest = {}
        if "conditions" in status:
            body = {
                "apiVersion": ref.api_version, "kind": ref.kind,
                "metadata": {"name": ref.name, "namespace": ref.namespace},
                "status": {"conditions": writer.own(status["conditions"] or [])},
            }
            await self._call("PATCH", ref.path("status"), body=body, content_type=APPLY_PATCH,
                             params={"fieldManager": writer.field_manager, "force": "true"})
            metrics.record_conditions(ref.namespace, ref.kind, ref.name,
                                      writer.own(status["conditions"] or []))
        if rest:
            await self.patch(ref, {"status": rest}, "status")

    async def post_event(self, event: Obj) -> None:
        """Post an Event; one with the same name (same reason, message and time) is kept."""
        try:
            await self.create(event)
        except ApiError as exc:
            if exc.status != 409:
                raise
