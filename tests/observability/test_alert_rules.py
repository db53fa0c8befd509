"""The chart's alert rules: promtool checks them and runs their unit tests
(alerts_test.yaml); every alert has a firing test and a runbook in docs/alerts.md."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "charts" / "mqcluster-operator" / "files" / "alerts.yaml"
UNIT_TESTS = Path(__file__).with_name("alerts_test.yaml")
RUNBOOKS = ROOT / "docs" / "alerts.md"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (apt-get install prometheus)")


def alerts() -> list[dict[str, object]]:
    data = yaml.safe_load(RULES.read_text())
    return [rule for group in data["groups"] for rule in group["rules"] if "alert" in rule]


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120,
                          check=False)


@needs_promtool
def test_rules_pass_promtool_check() -> None:
    out = promtool("check", "rules", str(RULES))
    assert out.returncode == 0, out.stdout + out.stderr


@needs_promtool
def test_alert_unit_tests_pass() -> None:
    out = promtool("test", "rules", str(UNIT_TESTS))
    assert out.returncode == 0, out.stdout + out.stderr


@needs_promtool
def test_the_unit_tests_catch_a_no_master_alert_that_waits_too_long(tmp_path: Path) -> None:
    rules = RULES.read_text()
    slow = rules.replace("        for: 30s\n", "        for: 5m\n", 1)
    assert slow != rules
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "alerts.yaml").write_text(slow)
    tests = yaml.safe_load(UNIT_TESTS.read_text())
    tests["rule_files"] = [str(tmp_path / "rules" / "alerts.yaml")]
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(tests))
    out = promtool("test", "rules", str(tmp_path / "t.yaml"))
    assert out.returncode != 0
    assert "MQClusterNoMaster" in out.stdout + out.stderr


def test_every_alert_has_a_firing_unit_test() -> None:
    tests = yaml.safe_load(UNIT_TESTS.read_text())["tests"]
    fired = {case["alertname"] for test in tests for case in test["alert_rule_test"]
             if case.get("exp_alerts")}
    quiet = {case["alertname"] for test in tests for case in test["alert_rule_test"]
             if not case.get("exp_alerts")}
    names = {str(rule["alert"]) for rule in alerts()}
    assert names - fired == set(), "alerts without a test that fires them"
    assert names - quiet == set(), "alerts without a test where they stay quiet"


def test_every_alert_has_a_runbook_section_named_by_its_annotation() -> None:
    text = RUNBOOKS.read_text()
    anchors = {h.strip().lower(): h.strip()
               for h in re.findall(r"^## (.+)$", text, flags=re.MULTILINE)}
    for rule in alerts():
        name = str(rule["alert"])
        annotations = rule["annotations"]
        assert isinstance(annotations, dict)
        assert annotations["runbook"] == f"docs/alerts.md#{name.lower()}"
        assert name.lower() in anchors, f"docs/alerts.md has no section {name}"
        assert rule["labels"]["severity"] in ("warning", "critical")  # type: ignore[index]
        # the table at the top lists it too
        assert f"| {name} |" in text
