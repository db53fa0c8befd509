"""API group, label and annotation keys, and the names of generated objects."""

from __future__ import annotations

GROUP = "mqcluster.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_PART_OF = "app.kubernetes.io/part-of"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_VERSION = "app.kubernetes.io/version"
LABEL_ROLE = "role"
LABEL_BROKER_NAME = "mqcluster.io/broker-name"

ROLE_MASTER = "master"
ROLE_SLAVE = "slave"

ANNOTATION_PAUSE = "mqcluster.io/pause-reconciliation"
ANNOTATION_SWITCHOVER = "mqcluster.io/switchover-to"
ANNOTATION_RESTART = "mqcluster.io/restart"
ANNOTATION_MIGRATION = "mqcluster.io/migration"  # start | abort
ANNOTATION_UPGRADE = "mqcluster.io/upgrade"  # resume: a new timeout for the step waited on
ANNOTATION_WIPE_REPLICA = "mqcluster.io/wipe-replica"  # <pod>: wipe its store, resync it
ANNOTATION_CONFIG_HASH = "mqcluster.io/config-hash"
ANNOTATION_RESTARTED_AT = "mqcluster.io/restarted-at"

MANAGER = "mqcluster-operator"
PART_OF = "mqcluster"


def headless_service(name: str) -> str:
    return f"{name}-headless"


def config_map(name: str) -> str:
    return f"{name}-config"


def client_service(name: str) -> str:
    return name


def read_service(name: str) -> str:
    return f"{name}-read"


def pdb(name: str) -> str:
    return name


def pod(name: str, ordinal: int) -> str:
    return f"{name}-{ordinal}"


def pod_dns(name: str, ordinal: int, namespace: str) -> str:
    """Stable DNS name of a StatefulSet pod behind its headless Service."""
    return f"{pod(name, ordinal)}.{headless_service(name)}.{namespace}.svc"
