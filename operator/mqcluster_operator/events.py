"""core/v1 Events about our custom resources (built here, posted by k8s.Api)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from .names import MANAGER

REASON_MASTER_CHANGED = "MasterChanged"
REASON_INVALID_SPEC = "InvalidSpec"
REASON_SWITCHOVER = "Switchover"
REASON_RESTART = "Restart"
REASON_UPGRADE = "Upgrade"
REASON_CONFIG = "RuntimeConfig"


def build_event(
    involved: Mapping[str, Any], type_: str, reason: str, message: str, now: str
) -> dict[str, Any]:
    meta = involved["metadata"]
    digest = hashlib.sha256(f"{reason}|{message}|{now}".encode()).hexdigest()[:10]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{digest}", "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": involved["apiVersion"],
            "kind": involved["kind"],
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid", ""),
        },
        "type": type_,
        "reason": reason,
        "message": message[:1024],
        "source": {"component": MANAGER},
        "reportingComponent": MANAGER,
        "reportingInstance": MANAGER,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
