"""Object metadata: owner references, the app.kubernetes.io labels, hashes."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from .. import names

Obj = dict[str, Any]


class SpecError(ValueError):
    """The spec cannot be turned into objects (reported as reason InvalidSpec)."""


@dataclass(frozen=True)
class Owner:
    """The custom resource the built objects belong to."""

    kind: str
    name: str
    namespace: str
    uid: str
    api_version: str = names.API_VERSION

    @classmethod
    def from_body(cls, body: Any) -> Owner:
        meta = body["metadata"]
        return cls(
            kind=body["kind"],
            name=meta["name"],
            namespace=meta["namespace"],
            uid=meta["uid"],
            api_version=body.get("apiVersion", names.API_VERSION),
        )

    def reference(self) -> Obj:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


def selector_labels(owner: Owner, component: str) -> dict[str, str]:
    return {
        names.LABEL_NAME: f"mqcluster-{component}",
        names.LABEL_INSTANCE: owner.name,
        names.LABEL_COMPONENT: component,
    }


def labels(owner: Owner, component: str, version: str | None = None) -> dict[str, str]:
    out = {
        **selector_labels(owner, component),
        names.LABEL_PART_OF: names.PART_OF,
        names.LABEL_MANAGED_BY: names.MANAGER,
    }
    if version:
        out[names.LABEL_VERSION] = version
    return out


def metadata(owner: Owner, name: str, obj_labels: dict[str, str], **extra: Any) -> Obj:
    meta: Obj = {
        "name": name,
        "namespace": owner.namespace,
        "labels": dict(obj_labels),
        "ownerReferences": [owner.reference()],
    }
    meta.update({k: v for k, v in extra.items() if v})
    return meta


def content_hash(data: Any) -> str:
    blob = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def image_tag(image: str) -> str | None:
    """The tag of an image reference, for the app.kubernetes.io/version label."""
    last = image.rsplit("/", 1)[-1]
    if "@" in last or ":" not in last:
        return None
    return last.rsplit(":", 1)[1]
