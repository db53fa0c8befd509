"""The election followers' own writes: backoff after failures, refusals reported once."""

from __future__ import annotations

import random
from typing import Any

from mqcluster_operator.handlers import run_follower
from mqcluster_operator.k8s import ApiError
from mqcluster_operator.write_backoff import REASON_REFUSED, WriteBackoff

BODY = {"apiVersion": "mqcluster.io/v1alpha1", "kind": "BrokerGroup",
        "metadata": {"name": "g", "namespace": "ns", "uid": "u1"}}


def test_retry_after_is_honoured_and_capped() -> None:
    b = WriteBackoff(cap=30.0)
    assert b.delay(ApiError(429, "TooManyRequests", "slow down", retry_after=7.0)) == 7.0
    assert b.delay(ApiError(429, "TooManyRequests", "slow down", retry_after=600.0)) == 30.0


def test_server_failures_back_off_exponentially_with_jitter_up_to_the_cap() -> None:
    b = WriteBackoff(base=0.5, cap=8.0, rng=random.Random(1))
    delays = [b.delay(ApiError(500, "InternalError", "boom")) for _ in range(8)]
    ceilings = [min(8.0, 0.5 * 2 ** i) for i in range(8)]
    assert all(c / 2 <= d <= c for d, c in zip(delays, ceilings, strict=True))
    assert delays[-1] >= 4.0
    b.succeeded()
    assert b.delay(ApiError(409, "Conflict", "stale")) <= 0.5


def test_a_refused_write_waits_the_cap_and_is_reported_once() -> None:
    b = WriteBackoff(cap=30.0)
    refusal = ApiError(422, "Invalid", "status.masterPod: must be a string")
    assert b.delay(refusal) == 30.0
    assert b.report(refusal) == str(refusal)
    assert b.report(refusal) is None
    assert b.report(ApiError(500, "InternalError", "boom")) is None
    assert b.report(ApiError(404, "NotFound", "gone")) is None  # deleted meanwhile


class ScriptedFollower:
    def __init__(self, failures: list[Exception | None], stopped: Stopped) -> None:
        self.failures = failures
        self.stopped = stopped
        self.waits: list[float] = []

    async def step(self, body: Any, changed: bool) -> None:
        failure = self.failures.pop(0)
        if not self.failures:
            self.stopped.flag = True
        if failure is not None:
            raise failure

    async def wait(self, stopped: Any, timeout: float) -> bool:
        self.waits.append(timeout)  # no real waiting: the test reads the chosen delays
        return False


class Stopped:
    flag = False

    def __bool__(self) -> bool:
        return self.flag


class RecordingApi:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def post_event(self, event: dict[str, Any]) -> None:
        self.events.append(event)


class Log:
    def warning(self, *args: Any) -> None:
        pass


async def test_the_daemon_loop_waits_as_told_and_reports_a_refusal_once() -> None:
    stopped = Stopped()
    refusal = ApiError(422, "Invalid", "bad label value")
    follower = ScriptedFollower([
        ApiError(429, "TooManyRequests", "slow down", retry_after=4.0),
        None,
        refusal,
        refusal,
        ApiError(503, "ServiceUnavailable", "restarting"),
        None,
    ], stopped)
    api = RecordingApi()
    await run_follower(follower, BODY, api, lambda: "2026-01-01T00:00:00Z", stopped, 1.0,
                       WriteBackoff(cap=20.0, rng=random.Random(3)), Log())
    assert follower.waits[0] == 4.0          # Retry-After
    assert follower.waits[1] == 1.0          # back to the normal interval
    assert follower.waits[2:4] == [20.0, 20.0]  # refused: the cap, no hot loop
    assert 1.0 <= follower.waits[4] <= 20.0
    assert follower.waits[5] == 1.0
    assert [e["reason"] for e in api.events] == [REASON_REFUSED]
    assert "bad label value" in api.events[0]["message"]
