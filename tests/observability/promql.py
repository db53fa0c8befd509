"""Expressions of the dashboards and alert rules, ready to send to Prometheus' HTTP API."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "mqcluster-operator"
ALERTS = CHART / "files" / "alerts.yaml"
METRIC = re.compile(r"\b((?:rocketmq|mqcontroller|mqcluster_operator)_[a-z0-9_]+)\b")


@dataclass(frozen=True)
class Query:
    where: str
    """``dashboard / panel`` or ``alert NAME``, for messages."""
    expr: str


def dashboard_queries(values: Mapping[str, str], rate_interval: str) -> list[Query]:
    """Every panel target of every dashboard, its variables replaced by ``values``."""
    out = []
    for path in sorted((CHART / "dashboards").glob("*.json")):
        board = json.loads(path.read_text())
        for panel in board["panels"]:
            for target in panel["targets"]:
                expr = target["expr"].replace("$__rate_interval", rate_interval)
                for name, value in values.items():
                    expr = expr.replace(f"${name}", value)
                out.append(Query(f"{path.stem} / {panel['title']}", expr))
    return out


def alert_queries() -> list[Query]:
    data = yaml.safe_load(ALERTS.read_text())
    return [Query(f"alert {rule['alert']}", str(rule["expr"]))
            for group in data["groups"] for rule in group["rules"] if "alert" in rule]


def metric_names(expr: str) -> set[str]:
    return set(METRIC.findall(expr))
