"""Benches and the test support import nothing from ``tests``, and no shipped package
imports the test support: ``mqcluster_testing`` sits between the two."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def imported(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
    return out


def offenders(folders: list[str], banned: str) -> list[str]:
    return sorted(
        f"{path.relative_to(REPO)}: {name}"
        for folder in folders for path in (REPO / folder).rglob("*.py")
        for name in imported(path) if name == banned or name.startswith(banned + ".")
    )


def test_benches_and_test_support_do_not_import_tests() -> None:
    assert offenders(["bench", "mqcluster_testing", "chaos"], "tests") == []


@pytest.mark.parametrize("folder", ["broker_image", "operator", "pipeline", "chaos"])
def test_shipped_code_does_not_import_test_support(folder: str) -> None:
    assert offenders([folder], "mqcluster_testing") == []
