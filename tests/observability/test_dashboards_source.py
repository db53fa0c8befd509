"""The dashboards in the chart are what dashboards_source.py makes (edit the source, then
``python -m tests.observability.dashboards_source``)."""

from __future__ import annotations

import pytest

from .dashboards_source import OUT, build, render


@pytest.mark.parametrize("name", sorted(build()))
def test_the_chart_holds_the_generated_dashboard(name: str) -> None:
    assert (OUT / name).read_text() == render(build()[name]), (
        f"{name} differs from tests/observability/dashboards_source.py: run "
        "python -m tests.observability.dashboards_source")


def test_no_dashboard_in_the_chart_lacks_a_source() -> None:
    assert {p.name for p in OUT.glob("*.json")} == set(build())
