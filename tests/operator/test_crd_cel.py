"""The CRDs' CEL rules (``x-kubernetes-validations``) evaluated as the API server does.

When a CRD is created, the API server evaluates every rule against every declared
``default`` (with ``oldSelf`` = ``self`` = the default as written, not defaulted further);
a rule that errors (e.g. reads a key the default lacks) makes the whole CRD invalid.
On a request it defaults the object first and evaluates the rules against the result.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import celpy
import pytest
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError

from mqcluster_operator import crdgen

from .conftest import load_examples

Json = Any
Schema = dict[str, Any]

CRDS = {crd["spec"]["names"]["kind"]: crd for crd in crdgen.build_crds()}
ENV = celpy.Environment()


def root_schema(kind: str) -> Schema:
    schema: Schema = CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def evaluate(rule: str, self_value: Json, old_value: Json) -> bool:
    """Evaluate one rule; an evaluation error (no such key, type mismatch) raises."""
    program = ENV.program(ENV.compile(rule))
    activation = {"self": json_to_cel(self_value), "oldSelf": json_to_cel(old_value)}
    result = program.evaluate(activation)
    if isinstance(result, CELEvalError):
        raise result
    return bool(result)


def rule_results(schema: Schema, value: Json, path: str) -> Iterator[tuple[str, str, bool]]:
    """(path, rule, result) for every rule in ``schema``'s subtree that ``value`` reaches,
    with ``oldSelf`` = ``self`` (an update that changes nothing)."""
    for rule in schema.get("x-kubernetes-validations", []):
        try:
            ok = evaluate(rule["rule"], value, value)
        except CELEvalError as err:
            raise AssertionError(f"{path}: rule {rule['rule']!r} fails to evaluate: {err}") from err
        yield path, rule["rule"], ok
    if isinstance(value, dict):
        for key, child in value.items():
            sub = schema.get("properties", {}).get(key)
            if sub is None and isinstance(schema.get("additionalProperties"), dict):
                sub = schema["additionalProperties"]
            if sub is not None:
                yield from rule_results(sub, child, f"{path}.{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, child in enumerate(value):
            yield from rule_results(schema["items"], child, f"{path}[{index}]")


def declared_defaults(schema: Schema, path: str) -> Iterator[tuple[str, Schema]]:
    if "default" in schema:
        yield path, schema
    for key, sub in schema.get("properties", {}).items():
        yield from declared_defaults(sub, f"{path}.{key}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from declared_defaults(schema[key], f"{path}.{key}")


def apply_defaults(schema: Schema, value: Json) -> Json:
    """The API server's defaulting: absent properties get their default, recursively."""
    if isinstance(value, dict):
        out = dict(value)
        for key, sub in schema.get("properties", {}).items():
            if key not in out and "default" in sub:
                out[key] = copy.deepcopy(sub["default"])
            if key in out:
                out[key] = apply_defaults(sub, out[key])
        if isinstance(schema.get("additionalProperties"), dict):
            for key in set(out) - set(schema.get("properties", {})):
                out[key] = apply_defaults(schema["additionalProperties"], out[key])
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(schema["items"], item) for item in value]
    return value


DEFAULT_CASES = [
    pytest.param(kind, path, node, id=f"{kind}{path}")
    for kind in sorted(CRDS)
    for path, node in declared_defaults(root_schema(kind), "")
]


@pytest.mark.parametrize(("kind", "path", "node"), DEFAULT_CASES)
def test_every_rule_holds_on_every_declared_default(kind: str, path: str, node: Schema) -> None:
    failed = [f"{p}: {rule}" for p, rule, ok in rule_results(node, node["default"], path) if not ok]
    assert not failed, f"{kind} default at {path} breaks: {failed}"


def test_the_defaults_reach_the_rules() -> None:
    """The spec-level ``default: {}`` of Controller meets its transition rule."""
    spec = root_schema("Controller")["properties"]["spec"]
    assert spec["default"] == {}
    assert list(rule_results(spec, spec["default"], ".spec"))


@pytest.mark.parametrize(
    "example", load_examples(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}"
)
def test_every_rule_holds_on_the_examples(example: dict[str, Any]) -> None:
    schema = root_schema(example["kind"])
    defaulted = apply_defaults(schema, example)
    results = list(rule_results(schema, defaulted, ""))
    assert results, "the examples should exercise the rules"
    failed = [f"{path}: {rule}" for path, rule, ok in results if not ok]
    assert not failed, failed


def test_a_rule_reading_a_key_the_default_lacks_is_caught() -> None:
    node = {"type": "object", "default": {},
            "x-kubernetes-validations": [{"rule": "self.deployment == oldSelf.deployment"}]}
    with pytest.raises(AssertionError, match="fails to evaluate"):
        list(rule_results(node, node["default"], ".spec"))


def test_transition_rules_still_refuse_the_changes() -> None:
    controller = root_schema("Controller")["properties"]["spec"]
    (rule,) = (r["rule"] for r in controller["x-kubernetes-validations"])
    assert not evaluate(rule, {"deployment": "Standalone"}, {"deployment": "Embedded"})
    assert evaluate(rule, {"deployment": "Embedded"}, {"deployment": "Embedded"})
    group = root_schema("BrokerGroup")["properties"]["spec"]
    rules = {r["message"]: r["rule"] for r in group["x-kubernetes-validations"]}
    mode = rules["mode can only change from DLedger to Controller (migration)"]
    assert evaluate(mode, {"mode": "Controller"}, {"mode": "DLedger"})
    assert not evaluate(mode, {"mode": "DLedger"}, {"mode": "Controller"})
