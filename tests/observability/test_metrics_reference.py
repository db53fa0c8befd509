"""docs/metrics.md and the exporters agree: every exported metric is documented with its
type and labels, and every documented metric is exported."""

from __future__ import annotations

import pytest

from .exporters import documented, exported


@pytest.mark.parametrize("process", ["broker", "controller", "proxy", "operator"])
def test_reference_lists_exactly_what_the_process_exports(process: str) -> None:
    docs = {m.name: m for m in documented()[process]}
    real = {m.name: m for m in exported()[process]}
    assert sorted(set(real) - set(docs)) == [], "exported but not in docs/metrics.md"
    assert sorted(set(docs) - set(real)) == [], "in docs/metrics.md but not exported"
    for name, metric in real.items():
        assert docs[name] == metric, f"{name}: the reference says {docs[name]}"


def test_the_parser_sees_a_wrong_row() -> None:
    text = ("## mqbroker\n\n| metric | type | labels | meaning |\n|---|---|---|---|\n"
            "| `rocketmq_topic_number` | counter | cluster | topics |\n")
    (row,) = documented(text)["broker"]
    assert (row.name, row.type, row.labels) == ("rocketmq_topic_number", "counter",
                                                frozenset({"cluster"}))
    assert row not in exported()["broker"]
