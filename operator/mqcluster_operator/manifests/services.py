"""Services and the PodDisruptionBudget."""

from __future__ import annotations

from typing import Any

from .meta import Obj, Owner, metadata


def service_ports(ports: dict[str, int]) -> list[Obj]:
    return [
        {"name": name, "port": port, "targetPort": name, "protocol": "TCP"}
        for name, port in ports.items()
    ]


def headless_service(
    owner: Owner, name: str, obj_labels: dict[str, str], selector: dict[str, str],
    ports: dict[str, int],
) -> Obj:
    """Stable pod DNS names; not-ready pods are published so peers find each other."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(owner, name, obj_labels),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": dict(selector),
            "ports": service_ports(ports),
        },
    }


def service(
    owner: Owner, name: str, obj_labels: dict[str, str], selector: dict[str, str],
    ports: list[Obj], service_type: str = "ClusterIP", annotations: dict[str, str] | None = None,
) -> Obj:
    spec: dict[str, Any] = {"type": service_type, "selector": dict(selector), "ports": ports}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(owner, name, obj_labels, annotations=dict(annotations or {})),
        "spec": spec,
    }


def pod_disruption_budget(
    owner: Owner, name: str, obj_labels: dict[str, str], selector: dict[str, str]
) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(owner, name, obj_labels),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": dict(selector)}},
    }


def config_map(owner: Owner, name: str, obj_labels: dict[str, str], data: dict[str, str]) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(owner, name, obj_labels),
        "data": dict(data),
    }
