"""Generate the CRDs from the pydantic models: ``python -m mqcluster_operator.crdgen``.

Kubernetes wants structural schemas: no ``$ref``, no ``anyOf`` with ``null`` (an
optional field is simply not required; the API server prunes nulls), no
``additionalProperties`` beside ``properties``. The pydantic JSON schema is
rewritten into that shape; free-form maps keep ``x-kubernetes-preserve-unknown-fields``.
The same CRDs are written into the Helm chart as templates gated by ``crds.enabled``.
"""

from __future__ import annotations

import argparse
import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, NoDefault
from pydantic_core import core_schema

from .models import BrokerGroupSpec, BrokerGroupStatus, ControllerSpec, ControllerStatus
from .names import GROUP, VERSION

Schema = dict[str, Any]

REPO_ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = REPO_ROOT / "crds"
CHART_CRD_DIR = REPO_ROOT / "charts" / "mqcluster-operator" / "templates" / "crds"


@dataclass(frozen=True)
class Kind:
    kind: str
    plural: str
    short_names: tuple[str, ...]
    spec: type[BaseModel]
    status: type[BaseModel]
    columns: tuple[Schema, ...]
    spec_required: bool


READY_COLUMN: Schema = {
    "name": "Ready",
    "type": "string",
    "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
}
AGE_COLUMN: Schema = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}

KINDS: tuple[Kind, ...] = (
    Kind(
        kind="Controller",
        plural="controllers",
        short_names=("mqc",),
        spec=ControllerSpec,
        status=ControllerStatus,
        columns=(
            {"name": "Deployment", "type": "string", "jsonPath": ".spec.deployment"},
            {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
            {"name": "Active", "type": "string", "jsonPath": ".status.activeController"},
            {"name": "Term", "type": "integer", "jsonPath": ".status.raftTerm"},
            READY_COLUMN,
            AGE_COLUMN,
        ),
        spec_required=False,
    ),
    Kind(
        kind="BrokerGroup",
        plural="brokergroups",
        short_names=("bg",),
        spec=BrokerGroupSpec,
        status=BrokerGroupStatus,
        columns=(
            {"name": "Mode", "type": "string", "jsonPath": ".spec.mode"},
            {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
            {"name": "Master", "type": "string", "jsonPath": ".status.masterPod"},
            {"name": "Epoch", "type": "integer", "jsonPath": ".status.masterEpoch"},
            READY_COLUMN,
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase", "priority": 1},
            {"name": "Migration", "type": "string", "jsonPath": ".status.migration.step",
             "priority": 1},
            {"name": "Upgrade", "type": "string", "jsonPath": ".status.upgrade.progress",
             "priority": 1},
            AGE_COLUMN,
        ),
        spec_required=True,
    ),
)


class _FactoryDefaults(GenerateJsonSchema):
    """Emit defaults of ``default_factory`` fields: ``{}`` for nested models, non-empty lists."""

    def get_default_value(self, schema: core_schema.WithDefaultSchema) -> Any:
        factory = schema.get("default_factory")
        if factory is None or schema.get("default_factory_takes_data"):
            return super().get_default_value(schema)
        value = factory()  # type: ignore[call-arg]
        if isinstance(value, BaseModel):
            return {}
        if value:
            return value
        return NoDefault


def inline_refs(node: Any, defs: Schema) -> Any:
    """Replace every ``{"$ref": "#/$defs/X"}`` with a copy of X (siblings of $ref win)."""
    if isinstance(node, list):
        return [inline_refs(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = node["$ref"].rsplit("/", 1)[-1]
        merged = copy.deepcopy(defs[target])
        merged.update({k: v for k, v in node.items() if k != "$ref"})
        return inline_refs(merged, defs)
    return {k: inline_refs(v, defs) for k, v in node.items() if k != "$defs"}


def structural(node: Schema) -> Schema:
    """Rewrite one (ref-free) JSON schema node into a Kubernetes structural schema."""
    out = dict(node)
    out.pop("title", None)
    if "anyOf" in out:
        branches = [b for b in out.pop("anyOf") if b.get("type") != "null"]
        if len(branches) != 1:
            raise ValueError(f"cannot make a structural schema of anyOf {branches!r}")
        out = {**branches[0], **out}
        out.pop("title", None)
    if "default" in out and out["default"] is None:
        del out["default"]
    extra = out.get("additionalProperties")
    if extra is True or extra is False or (extra is not None and "properties" in out):
        del out["additionalProperties"]
        if extra is True:
            out["x-kubernetes-preserve-unknown-fields"] = True
    elif isinstance(extra, dict):
        out["additionalProperties"] = structural(extra)
    if "properties" in out:
        out["properties"] = {k: structural(v) for k, v in out["properties"].items()}
    if "items" in out:
        out["items"] = structural(out["items"])
    return out


def without_defaults(node: Any) -> Any:
    """Status is written by the operator only: the API server should not default it."""
    if isinstance(node, list):
        return [without_defaults(item) for item in node]
    if isinstance(node, dict):
        return {k: without_defaults(v) for k, v in node.items() if k != "default"}
    return node


def model_schema(model: type[BaseModel]) -> Schema:
    raw = model.model_json_schema(by_alias=True, schema_generator=_FactoryDefaults)
    return structural(inline_refs(raw, raw.get("$defs", {})))


def open_api_schema(kind: Kind) -> Schema:
    spec = model_schema(kind.spec)
    if not kind.spec_required:
        spec["default"] = {}
    root: Schema = {
        "type": "object",
        "description": f"{kind.kind} of an mqcluster deployment.",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": without_defaults(model_schema(kind.status)),
        },
    }
    if kind.spec_required:
        root["required"] = ["spec"]
    return root


def build_crd(kind: Kind) -> Schema:
    singular = kind.kind.lower()
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{kind.plural}.{GROUP}",
            "labels": {"app.kubernetes.io/part-of": "mqcluster"},
        },
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind.kind,
                "listKind": f"{kind.kind}List",
                "plural": kind.plural,
                "singular": singular,
                "shortNames": list(kind.short_names),
                "categories": ["mqcluster"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [dict(c) for c in kind.columns],
                    "schema": {"openAPIV3Schema": open_api_schema(kind)},
                }
            ],
        },
    }


def build_crds() -> list[Schema]:
    return [build_crd(kind) for kind in KINDS]


def dump(obj: Schema) -> str:
    return yaml.safe_dump(obj, sort_keys=False, width=100, default_flow_style=False)


def chart_template(crd: Schema) -> str:
    """The CRD as a Helm template: gated by crds.enabled, kept on uninstall by crds.keep, and
    left out when the cluster has it from outside the release (``kubectl apply -f crds/``)."""
    body = {k: v for k, v in crd.items() if k != "metadata"}
    name = crd["metadata"]["name"]
    lines = [
        "{{- if and .Values.crds.enabled"
        f' (include "mqcluster-operator.ownsCrd" (list . "{name}")) }}}}',
        "# Left out when the cluster has this CRD from outside the release (kubectl apply -f",
        "# crds/): helm would refuse to adopt it; update it with kubectl apply -f crds/ then.",
        f"apiVersion: {body.pop('apiVersion')}",
        f"kind: {body.pop('kind')}",
        "metadata:",
        f"  name: {crd['metadata']['name']}",
        "  labels:",
        '    {{- include "mqcluster-operator.labels" . | nindent 4 }}',
        "  {{- if .Values.crds.keep }}",
        "  annotations:",
        "    helm.sh/resource-policy: keep",
        "  {{- end }}",
    ]
    return "\n".join(lines) + "\n" + dump(body) + "{{- end }}\n"


def rendered_files() -> dict[Path, str]:
    """Every generated file and its content."""
    files: dict[Path, str] = {}
    for crd in build_crds():
        name = f"{crd['metadata']['name']}.yaml"
        files[CRD_DIR / name] = dump(crd)
        files[CHART_CRD_DIR / name] = chart_template(crd)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the CRDs generated from the models.")
    parser.add_argument("--check", action="store_true", help="fail if a file is out of date")
    args = parser.parse_args(argv)
    stale = []
    for path, text in rendered_files().items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(path)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    for path in stale:
        print(("stale: " if args.check else "wrote: ") + str(path.relative_to(REPO_ROOT)))
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
