"""Manifests -> local processes. Pure: the operator's own builders render each pod's
config; this module only moves it from Kubernetes to one machine."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import names
from ..manifests import broker as broker_manifests
from ..manifests import controller as controller_manifests
from ..manifests import pods
from ..manifests import proxy as proxy_manifests
from ..manifests.controller import ControllerView, controller_view
from ..manifests.meta import Owner
from ..models import BrokerGroupSpec, ControllerSpec

NAMESPACE = "local"


class PlanError(ValueError):
    """Manifests that cannot run locally; the message names the resource."""


@dataclass(frozen=True)
class LocalProcess:
    name: str
    """``<resource>-<ordinal>``, as the pod would be named."""
    kind: str
    """``namesrv``, ``controller``, ``broker`` or ``proxy``."""
    group: str
    """The resource it belongs to."""
    ip: str
    props: dict[str, str]
    boot_marker: str

    @property
    def module(self) -> str:
        return {"namesrv": "mqcluster.namesrv.main", "controller": "mqcluster.controller.main",
                "broker": "mqcluster.broker.main", "proxy": "mqcluster.proxy.main"}[self.kind]


def parse_properties(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            out[key] = value
    return out


def pod_configs(data: Mapping[str, str], conf: str, replicas: int) -> list[dict[str, str]]:
    """What each pod's start script concatenates: the shared file, then its own (a
    Deployment's pods, the proxy's, have none)."""
    shared = parse_properties(data[conf])
    return [{**shared, **parse_properties(data.get(f"pod-{i}.conf", ""))}
            for i in range(replicas)]


def localize(props: Mapping[str, str], hosts: Mapping[str, str], data_root: Path,
             ip: str) -> dict[str, str]:
    """Pod DNS names -> local addresses, pod paths -> ``data_root``, bound to ``ip``."""
    pattern = re.compile(r"(?<![\w.])(" + "|".join(
        re.escape(h) for h in sorted(hosts, key=len, reverse=True)) + r")(?:\.[A-Za-z0-9-]+)*")
    out: dict[str, str] = {}
    for key, value in props.items():
        value = pattern.sub(lambda m: hosts[m.group(1)], value) if hosts else value
        out[key] = value.replace(pods.DATA_DIR, str(data_root))
    out["bindAddress"] = ip
    out["metricsPromExporterHost"] = ip
    return out


@dataclass(frozen=True)
class Manifests:
    controllers: list[tuple[Owner, ControllerSpec]]
    groups: list[tuple[Owner, BrokerGroupSpec]]


def read_manifests(docs: Iterable[Any]) -> Manifests:
    controllers: list[tuple[Owner, ControllerSpec]] = []
    groups: list[tuple[Owner, BrokerGroupSpec]] = []
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        kind, name = doc.get("kind"), (doc.get("metadata") or {}).get("name")
        if kind not in ("Controller", "BrokerGroup") or not name:
            raise PlanError(f"only Controller and BrokerGroup resources run locally, got "
                            f"{kind} {name!r}")
        owner = Owner(kind, name, NAMESPACE, f"local-{name}")
        try:
            if kind == "Controller":
                controllers.append((owner, ControllerSpec.model_validate(doc.get("spec") or {})))
            else:
                groups.append((owner, BrokerGroupSpec.model_validate(doc.get("spec") or {})))
        except ValueError as exc:
            raise PlanError(f"{kind} {name}: {exc}") from None
    return Manifests(controllers, groups)


def plan(manifests: Manifests, ip_prefix: str, data_root: Path) -> list[LocalProcess]:
    """Every process, in start order (controllers first), each on ``<ip_prefix>.<n>``."""
    pods_in_order: list[tuple[Owner, int]] = []
    for owner, cspec in manifests.controllers:
        pods_in_order += [(owner, i) for i in range(cspec.replicas)]
    for owner, gspec in manifests.groups:
        pods_in_order += [(owner, i) for i in range(gspec.replicas)]
    ips = {(o.name, i): f"{ip_prefix}.{n + 1}" for n, (o, i) in enumerate(pods_in_order)}
    hosts = {f"{names.pod(o.name, i)}.{names.headless_service(o.name)}": ip
             for (name, i), ip in ips.items() for o in [_owner_named(manifests, name)]}
    from .runner import PROGRAMS  # here: runner imports this module

    views: dict[str, ControllerView] = {}
    out: list[LocalProcess] = []
    for owner, cspec in manifests.controllers:
        views[owner.name] = controller_view(owner.name, owner.namespace, cspec)
        data = controller_manifests.config_data(owner, cspec)
        kind = "namesrv" if cspec.embedded() else "controller"
        marker = PROGRAMS["mqnamesrv" if cspec.embedded() else "mqcontroller"].boot_marker
        for i, props in enumerate(pod_configs(data, controller_manifests.conf_name(cspec),
                                              cspec.replicas)):
            ip = ips[(owner.name, i)]
            out.append(LocalProcess(names.pod(owner.name, i), kind, owner.name, ip,
                                    localize(props, hosts, data_root / names.pod(owner.name, i),
                                             ip), marker))
    for owner, gspec in manifests.groups:
        view = None
        if gspec.controllerRef is not None:
            view = views.get(gspec.controllerRef.name)
            if view is None:
                raise PlanError(f"BrokerGroup {owner.name}: controllerRef names "
                                f"{gspec.controllerRef.name!r}, not among the manifests")
        try:
            data = broker_manifests.config_data(owner, gspec, view)
        except ValueError as exc:
            raise PlanError(f"BrokerGroup {owner.name}: {exc}") from None
        for i, props in enumerate(pod_configs(data, broker_manifests.CONF, gspec.replicas)):
            ip = ips[(owner.name, i)]
            local = localize(props, hosts, data_root / names.pod(owner.name, i), ip)
            out.append(LocalProcess(names.pod(owner.name, i), "broker", owner.name, ip, local,
                                    "boot success"))
    # A Controller's proxy tier (spec.proxy): its replicas after every pod, same config.
    n = len(pods_in_order)
    for owner, cspec in manifests.controllers:
        if not cspec.proxy.enabled:
            continue
        props = pod_configs(proxy_manifests.config_data(owner, cspec), proxy_manifests.CONF,
                            1)[0]
        tier = proxy_manifests.name(owner)
        for i in range(cspec.proxy.replicas):
            n += 1
            ip = f"{ip_prefix}.{n}"
            out.append(LocalProcess(f"{tier}-{i}", "proxy", tier, ip,
                                    localize(props, hosts, data_root / f"{tier}-{i}", ip),
                                    "boot success"))
    return out


def _owner_named(manifests: Manifests, name: str) -> Owner:
    for owner, _ in [*manifests.controllers, *manifests.groups]:
        if owner.name == name:
            return owner
    raise KeyError(name)
