"""The follower's layout, read from the imports: one step module per concern, which
imports no other concern's step; pure planners that do no I/O; the daemon is the only
module that knows every step."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import mqcluster_operator.follow as follow

PACKAGE = Path(follow.__file__).parent
STEPS = ("following", "migration", "epochs", "scaling", "switchover", "runtime_config",
         "restart", "upgrade")
PLANS = ("election_plan", "epochs_plan", "migration_plan", "restart_plan",
         "runtime_config_plan", "scaling_plan", "upgrade_plan")
# What a planner may use: pure modules only (no API client, no driver, no step).
PURE = {"mqcluster_operator.names", "mqcluster_operator.conditions",
        "mqcluster_operator.events", "mqcluster_operator.models",
        "mqcluster_operator.config_keys"} | {f"mqcluster_operator.follow.{p}" for p in PLANS}
IO_LIBRARIES = ("asyncio", "aiohttp", "kopf", "kubernetes_asyncio")


def imports(module: str) -> set[str]:
    """The absolute names ``follow/<module>.py`` imports (``from . import x`` gives
    ``package.x``)."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    here = ["mqcluster_operator", "follow"]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = here[:len(here) - node.level + 1] if node.level else []
            name = ".".join([*base, *(node.module.split(".") if node.module else [])])
            if node.module is None:
                out.update(f"{name}.{alias.name}" for alias in node.names)
            else:
                out.add(name)
    return out


def test_every_concern_has_its_step_module() -> None:
    assert {p.stem for p in PACKAGE.glob("*.py")} >= {*STEPS, *PLANS, "daemon", "memo"}


@pytest.mark.parametrize("step", STEPS)
def test_a_step_imports_no_other_concerns_step(step: str) -> None:
    others = {f"mqcluster_operator.follow.{s}" for s in STEPS if s != step}
    assert imports(step) & (others | {"mqcluster_operator.follow.daemon"}) == set()


@pytest.mark.parametrize("plan", PLANS)
def test_a_planner_is_pure(plan: str) -> None:
    ours = {m for m in imports(plan) if m.startswith("mqcluster_operator")}
    assert ours <= PURE
    assert not {m for m in imports(plan) if m.split(".")[0] in IO_LIBRARIES}


def test_only_the_daemon_sequences_the_steps() -> None:
    steps = {f"mqcluster_operator.follow.{s}" for s in STEPS}
    users = {p.stem for p in PACKAGE.glob("*.py") if imports(p.stem) & steps} - set(STEPS)
    assert users == {"daemon", "memo"}  # memo: each concern's memory is declared beside it
