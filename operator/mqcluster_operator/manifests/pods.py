"""Pod template pieces shared by brokers and controllers."""

from __future__ import annotations

from typing import Any

from ..models import Scheduling, Storage

Obj = dict[str, Any]

RUN_AS = 10001
CONFIG_DIR = "/etc/mqcluster"
RUN_DIR = "/var/run/mqcluster"
DATA_DIR = "/home/mqcluster/store"
# The pod's "tmp" emptyDir. The root filesystem is read-only, so HOME and TMPDIR point
# here: whatever a library writes under them (log directories, caches) lands on a volume.
TMP_DIR = "/tmp"


def anti_affinity(selector: dict[str, str], scheduling: Scheduling) -> Obj | None:
    """The user's affinity, else a pod anti-affinity across nodes (preferred or required)."""
    if scheduling.affinity:
        return dict(scheduling.affinity)
    if scheduling.podAntiAffinity == "Disabled":
        return None
    term = {
        "labelSelector": {"matchLabels": dict(selector)},
        "topologyKey": "kubernetes.io/hostname",
    }
    if scheduling.podAntiAffinity == "Required":
        return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": term}
            ]
        }
    }


def scheduling_fields(selector: dict[str, str], scheduling: Scheduling) -> Obj:
    out: Obj = {}
    affinity = anti_affinity(selector, scheduling)
    if affinity:
        out["affinity"] = affinity
    if scheduling.tolerations:
        out["tolerations"] = [dict(t) for t in scheduling.tolerations]
    if scheduling.nodeSelector:
        out["nodeSelector"] = dict(scheduling.nodeSelector)
    if scheduling.topologySpreadConstraints:
        out["topologySpreadConstraints"] = [dict(t) for t in scheduling.topologySpreadConstraints]
    if scheduling.priorityClassName:
        out["priorityClassName"] = scheduling.priorityClassName
    return out


def health_probes(port_name: str = "metrics") -> Obj:
    """Readiness, liveness and startup probes on the process's ``/health`` endpoint."""

    def probe(period: int, failures: int) -> Obj:
        return {
            "httpGet": {"path": "/health", "port": port_name},
            "periodSeconds": period,
            "timeoutSeconds": 3,
            "failureThreshold": failures,
        }

    return {
        "startupProbe": probe(5, 60),
        "readinessProbe": probe(5, 3),
        "livenessProbe": probe(10, 6),
    }


def pod_env() -> list[Obj]:
    def field(name: str, path: str) -> Obj:
        return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}

    return [
        field("POD_NAME", "metadata.name"),
        field("POD_NAMESPACE", "metadata.namespace"),
        {"name": "HOME", "value": TMP_DIR},
        {"name": "TMPDIR", "value": TMP_DIR},
    ]


def pod_security_context() -> Obj:
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS,
        "runAsGroup": RUN_AS,
        "fsGroup": RUN_AS,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context() -> Obj:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def start_script(conf_name: str, command: str) -> list[str]:
    """Concatenate the shared and the per-pod properties, then exec the process."""
    script = (
        "set -eu\n"
        'ordinal="${POD_NAME##*-}"\n'
        f'cat {CONFIG_DIR}/{conf_name} "{CONFIG_DIR}/pod-${{ordinal}}.conf"'
        f" > {RUN_DIR}/{conf_name}\n"
        f"exec {command} -c {RUN_DIR}/{conf_name}\n"
    )
    return ["/bin/sh", "-c", script]


def volumes(config_map: str) -> list[Obj]:
    return [
        {"name": "config", "configMap": {"name": config_map}},
        {"name": "run", "emptyDir": {}},
        {"name": "tmp", "emptyDir": {}},
    ]


def volume_mounts() -> list[Obj]:
    return [
        {"name": "data", "mountPath": DATA_DIR},
        {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
        {"name": "run", "mountPath": RUN_DIR},
        {"name": "tmp", "mountPath": TMP_DIR},
    ]


def claim_template(storage: Storage, claim_labels: dict[str, str]) -> Obj:
    spec: Obj = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": storage.size}},
    }
    if storage.storageClassName:
        spec["storageClassName"] = storage.storageClassName
    return {"metadata": {"name": "data", "labels": dict(claim_labels)}, "spec": spec}


def container_ports(ports: dict[str, int]) -> list[Obj]:
    return [
        {"name": name, "containerPort": port, "protocol": "TCP"} for name, port in ports.items()
    ]
