"""What each process exports (names, types, labels) and what docs/metrics.md says it does."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.metrics import MetricWrapperBase

from mqcluster.broker.metrics import BrokerMetrics
from mqcluster.controller.events import ApplyBrokerIdEvent, ElectMasterEvent
from mqcluster.controller.metrics import ControllerMetrics, GroupCollector
from mqcluster.controller.statemachine import ControllerState
from mqcluster.proxy.groups import GroupTable
from mqcluster.proxy.metrics import ProxyMetrics
from mqcluster_operator import metrics as operator_metrics

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
SECTIONS = {"mqbroker": "broker", "mqcontroller": "controller", "mqproxy": "proxy",
            "operator": "operator"}


@dataclass(frozen=True)
class Metric:
    name: str
    """As exposed: counters with ``_total``, histograms by their base name."""
    type: str
    labels: frozenset[str]


def exposed_name(name: str, type_: str) -> str:
    return f"{name}_total" if type_ == "counter" else name


def of_wrappers(objects: Iterable[object]) -> set[Metric]:
    return {Metric(exposed_name(o._name, str(o._type)), str(o._type), frozenset(o._labelnames))
            for o in objects if isinstance(o, MetricWrapperBase)}


def broker() -> set[Metric]:
    return of_wrappers(vars(BrokerMetrics("c", "b")).values())


def controller() -> set[Metric]:
    out = of_wrappers(vars(ControllerMetrics()).values())
    state = ControllerState()  # one group, so every family has a sample to read labels from
    state.apply(ApplyBrokerIdEvent("c", "b", "127.0.0.1:1", 1, "x"))
    state.apply(ElectMasterEvent("b", 1))
    for family in GroupCollector(state).collect():
        labels = {k for s in family.samples for k in s.labels}
        out.add(Metric(family.name, family.type, frozenset(labels)))
    return out


def proxy() -> set[Metric]:
    return of_wrappers(vars(ProxyMetrics(GroupTable())).values())


def operator() -> set[Metric]:
    return of_wrappers(vars(operator_metrics).values())


def exported() -> dict[str, set[Metric]]:
    return {"broker": broker(), "controller": controller(), "proxy": proxy(),
            "operator": operator()}


ROW = re.compile(r"^\| `([a-z_:]+)` \| (counter|gauge|histogram) \|([^|]*)\|")


def documented(text: str | None = None) -> dict[str, set[Metric]]:
    """The tables of docs/metrics.md, by section (``## mqbroker`` ...)."""
    text = REFERENCE.read_text() if text is None else text
    out: dict[str, set[Metric]] = {}
    section: str | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            head = line[3:].split()[0]
            section = SECTIONS.get(head)
            if section is not None:
                out.setdefault(section, set())
            continue
        m = ROW.match(line)
        if m and section is not None:
            labels = frozenset(x.strip() for x in m.group(3).split(",") if x.strip())
            out[section].add(Metric(m.group(1), m.group(2), labels))
    return out
