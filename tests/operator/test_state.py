"""The handlers' typed state: built once from kopf's memo, whose entries (a test's API,
clock, intervals, drivers) win over the defaults, and shared by every resource's copy."""

from __future__ import annotations

import copy

import kopf
import pytest

from mqcluster_operator import handlers
from mqcluster_operator.applied import AppliedCache
from mqcluster_operator.follow.election_probes import default_probe
from mqcluster_operator.k8s import Api


async def test_the_memo_entries_win_over_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MQCLUSTER_POLL_INTERVAL_SECONDS", raising=False)
    api, applied = Api(), AppliedCache(0.0)

    def clock() -> str:
        return "2026-01-01T00:00:00Z"

    memo = kopf.Memo(api=api, clock=clock, follow_interval=0.0, applied=applied,
                     migration_driver=None)
    state = handlers.operator_state(memo)
    assert state.api is api and state.clock is clock and state.applied is applied
    assert state.follow_interval == 0.0  # given, though falsy
    assert state.poll_interval == 0.2 and state.probe_factory is default_probe
    assert state.migration_driver is None and state.upgrade_driver is None
    assert state.followers == {} and state.reconciled is state.readiness.memory


async def test_the_state_is_built_once_and_shared_by_each_resources_copy() -> None:
    memo = kopf.Memo()
    state = handlers.operator_state(memo)  # at login
    assert handlers.operator_state(memo) is state  # at startup: not a second hub
    resource_memo = copy.copy(memo)  # what kopf hands each resource's handlers
    assert handlers.operator_state(resource_memo) is state
