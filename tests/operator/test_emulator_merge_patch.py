"""The emulator applies merge patches as the API server does (RFC 7386), with its own
``apiserver.merge_patch`` rather than kmock's private helper."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mqcluster_testing.operator.apiserver import merge_patch


@pytest.mark.parametrize(("target", "patch", "expected"), [
    ({"a": 1, "b": 2}, {"b": None}, {"a": 1}),  # null removes
    ({"a": 1}, {"missing": None}, {"a": 1}),  # removing what is absent: nothing
    ({"spec": {"replicas": 3, "x": 1}}, {"spec": {"replicas": 2}},
     {"spec": {"replicas": 2, "x": 1}}),  # objects merge key by key
    ({"list": [1, 2, 3]}, {"list": [4]}, {"list": [4]}),  # lists replace whole
    ({"a": "text"}, {"a": {"b": 1, "c": None}}, {"a": {"b": 1}}),  # a scalar becomes an object
    ({}, {"new": {"k": None, "v": 1}}, {"new": {"v": 1}}),  # nulls inside new objects dropped
    ({"a": 1}, [1, 2], [1, 2]),  # a non-object patch replaces the target
])
def test_merge_patch(target: Any, patch: Any, expected: Any) -> None:
    before_target, before_patch = copy.deepcopy(target), copy.deepcopy(patch)
    assert merge_patch(target, patch) == expected
    assert (target, patch) == (before_target, before_patch)  # neither argument changed


def test_merge_patch_keeps_key_order() -> None:
    merged = merge_patch({"a": 1, "b": 2, "c": 3}, {"b": 20, "d": 4})
    assert list(merged) == ["a", "b", "c", "d"]
