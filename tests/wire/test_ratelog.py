"""RateLimitedLog: one line per kind per interval, and bounded memory however many kinds
(remote hosts) an attacker brings."""

from __future__ import annotations

import logging

import pytest

from mqcluster.wire.ratelog import RateLimitedLog

log = logging.getLogger("tests.ratelog")


def test_one_line_per_kind_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    limited = RateLimitedLog(log, interval=60.0, clock=lambda: now[0])
    caplog.set_level(logging.WARNING, logger=log.name)
    assert limited.warning("10.0.0.1", "refused %s", "a")
    assert not limited.warning("10.0.0.1", "refused %s", "b")
    assert limited.warning("10.0.0.2", "refused %s", "c")
    now[0] += 60
    assert limited.warning("10.0.0.1", "refused %s", "d")
    assert caplog.messages == [
        "refused a", "refused c", "refused d (and 1 more like it since the last such line)"]


def test_kinds_remembered_are_bounded() -> None:
    limited = RateLimitedLog(log, max_kinds=8, clock=lambda: 0.0)
    for i in range(100):
        limited.warning(f"10.0.{i}.1", "refused")
        assert len(limited._last) <= 8
