"""The CRDs' CEL rules evaluated as a real API server does: against every declared
default (the server rejects a CRD whose rule fails on its own default) and against the
sample resources in examples/ after structural defaulting. A CEL library evaluates the
rules, so a rule that reads a field a default lacks is caught here, not at install."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cel
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CRD_FILES = sorted((ROOT / "crds").glob("*.yaml"))
Schema = dict[str, Any]


def crd_schemas() -> dict[str, Schema]:
    out = {}
    for path in CRD_FILES:
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            out[crd["spec"]["names"]["kind"]] = version["schema"]["openAPIV3Schema"]
    return out


def apply_defaults(schema: Schema, value: Any) -> Any:
    """Structural defaulting: fill missing properties with their defaults, recursively."""
    if isinstance(value, dict) and schema.get("type") == "object":
        for name, sub in (schema.get("properties") or {}).items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                value[name] = apply_defaults(sub, value[name])
    elif isinstance(value, list) and "items" in schema:
        return [apply_defaults(schema["items"], v) for v in value]
    return value


def rules_with_values(schema: Schema, value: Any, path: str) -> Iterator[tuple[str, Schema, Any]]:
    """(path, rule, the value at that node) for every rule whose node ``value`` reaches."""
    if value is None:
        return
    for rule in schema.get("x-kubernetes-validations") or []:
        yield path, rule, value
    if isinstance(value, dict):
        for name, sub in (schema.get("properties") or {}).items():
            if name in value:
                yield from rules_with_values(sub, value[name], f"{path}.{name}")


def defaults_of(schema: Schema, path: str = "") -> Iterator[tuple[str, Schema, Any]]:
    """Every declared default, at the node that declares it."""
    if "default" in schema:
        yield path or ".", schema, copy.deepcopy(schema["default"])
    for name, sub in (schema.get("properties") or {}).items():
        yield from defaults_of(sub, f"{path}.{name}")
    if "items" in schema:
        yield from defaults_of(schema["items"], f"{path}[]")


def evaluate(rule: Schema, value: Any, old: Any) -> bool:
    env = {"self": value}
    if "oldSelf" in rule["rule"]:
        env["oldSelf"] = old
    result = cel.evaluate(rule["rule"], env)
    assert isinstance(result, bool), f"rule {rule['rule']!r} gave {result!r}"
    return result


DEFAULT_CASES = [(kind, where, node, value)
                 for kind, schema in crd_schemas().items()
                 for where, node, value in defaults_of(schema)]


@pytest.mark.parametrize(("kind", "where", "node", "value"), DEFAULT_CASES,
                         ids=[f"{c[0]}{c[1]}" for c in DEFAULT_CASES])
def test_every_rule_holds_on_every_declared_default(kind: str, where: str, node: Schema,
                                                    value: Any) -> None:
    for path, rule, at in rules_with_values(node, value, where):
        try:
            ok = evaluate(rule, at, at)
        except Exception as exc:
            pytest.fail(f"{kind} {path}: rule {rule['rule']!r} cannot be evaluated on the "
                        f"default {at!r}: {exc}")
        assert ok, f"{kind} {path}: the default {at!r} breaks {rule['message']!r}"


def example_resources() -> list[tuple[str, dict[str, Any]]]:
    kinds = crd_schemas()
    out = []
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") in kinds:
                out.append((f"{path.name}:{doc['metadata']['name']}", doc))
    return out


EXAMPLES = example_resources()


@pytest.mark.parametrize(("name", "resource"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_examples_pass_every_rule_after_defaulting(name: str, resource: dict[str, Any]) -> None:
    schema = crd_schemas()[resource["kind"]]
    obj = apply_defaults(schema, copy.deepcopy(resource))
    checked = 0
    for path, rule, at in rules_with_values(schema, obj, ""):
        assert evaluate(rule, at, at), f"{name} {path}: {rule['message']}"
        checked += 1
    assert checked > 0


def test_the_evaluator_rejects_what_the_rules_forbid() -> None:
    schema = crd_schemas()["BrokerGroup"]
    resource = copy.deepcopy(next(r for n, r in EXAMPLES if r["kind"] == "BrokerGroup"
                                  and r["spec"].get("mode") == "Controller"))
    del resource["spec"]["controllerRef"]
    obj = apply_defaults(schema, resource)
    broken = [rule["message"] for _, rule, at in rules_with_values(schema, obj, "")
              if not evaluate(rule, at, at)]
    assert broken == ["controllerRef is required when mode is Controller"]
    old = apply_defaults(schema, copy.deepcopy(resource))
    old["spec"]["mode"] = "Controller"
    new = copy.deepcopy(old)
    new["spec"]["mode"] = "DLedger"
    rule = next(r for r in schema["properties"]["spec"]["x-kubernetes-validations"]
                if "oldSelf.mode" in r["rule"])
    assert not evaluate(rule, new["spec"], old["spec"])
