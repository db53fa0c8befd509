"""Static checks of the two Dockerfiles (they are built by the e2e suite, where Docker runs)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BROKER = REPO / "broker_image" / "Dockerfile"
OPERATOR = REPO / "operator" / "Dockerfile"


def instructions(path: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", path.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


@pytest.mark.parametrize("path", [BROKER, OPERATOR], ids=["broker", "operator"])
def test_base_user_and_healthcheck(path: Path) -> None:
    ins = instructions(path)
    froms = [rest for op, rest in ins if op == "FROM"]
    assert froms and all(f.split()[0] == "python:3.11-slim" for f in froms)
    users = [rest for op, rest in ins if op == "USER"]
    assert users and users[-1].split(":")[0] not in {"root", "0"}
    assert any(op == "HEALTHCHECK" for op, _ in ins)
    for op, rest in ins:
        if op == "COPY" and "--from" not in rest:
            sources = rest.split()[:-1]
            for source in sources:
                assert (REPO / source).exists(), source


def test_broker_image_ships_the_four_programs() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert {"mqnamesrv", "mqcontroller", "mqbroker", "mqadmin"} <= set(scripts)
    text = BROKER.read_text()
    assert "/health" in text and "5557" in text
    assert "uid 10001" in text


def test_operator_image_runs_kopf_with_liveness() -> None:
    ins = dict(instructions(OPERATOR))
    assert ins["ENTRYPOINT"] == '["kopf"]'
    assert "--module=mqcluster_operator.handlers" in ins["CMD"]
    assert "--liveness=http://0.0.0.0:8080/healthz" in ins["CMD"]
